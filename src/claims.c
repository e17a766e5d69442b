/*-------------------------------------------------------------------------
 *
 * claims.c
 *	  Module entry point: settings, and the checks every API function shares.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "replication/message.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

int			claims_max_batch_size = 1000;
int			claims_json_output = CLAIMS_JSON_OUTPUT_COMPAT;

/* claims.json_output, in the manner of bytea_output. */
static const struct config_enum_entry claims_json_output_options[] = {
	{"compat", CLAIMS_JSON_OUTPUT_COMPAT, false},
	{"proto3", CLAIMS_JSON_OUTPUT_PROTO3, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/*
 * Define the settings. The API works with or without
 * shared_preload_libraries; preloading adds statistics and the worker.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("claims.max_batch_size",
							"Largest number of records one claims_begin_update may carry.",
							"Creates and destroys are counted together.",
							&claims_max_batch_size,
							1000, 1, 100000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("claims.json_output",
							 "How the API functions write their JSON responses.",
							 "compat: snake_case names, UUIDs as bare strings, every field written. "
							 "proto3: exactly what a proto3 JSON printer writes for the claims.v1 message.",
							 &claims_json_output,
							 CLAIMS_JSON_OUTPUT_COMPAT,
							 claims_json_output_options,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	claims_worker_define_gucs();
	if (process_shared_preload_libraries_in_progress)
	{
		claims_stats_init();
		claims_worker_register();
	}

	DefineCustomBoolVariable("claims.open_mode",
							 "Lets any role that may call the functions act for any cell id.",
							 "For experiments only: cell ids are then taken on trust, registered or not.",
							 &claims_open_mode,
							 false,
							 PGC_SIGHUP, 0,
							 NULL, NULL, NULL);

	MarkGUCPrefixReserved("claims");

	claims_call_init();
	claims_cache_init();
	claims_plans_init();
	claims_reworded_init();
}

/*
 * Refuse writes on a hot standby with the error a client can act on.
 */
void
claims_check_writable(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("%s cannot run on a hot standby", function),
				 errhint("Send writes to the primary server; read functions work on standbys.")));
}

/*
 * Cells are numbered from 1.
 */
void
claims_check_cell_id(int64 cell_id)
{
	if (cell_id <= 0)
	{
		claims_stats_count(CLAIMS_STAT_MALFORMED);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid request at $.cell_id: must be greater than 0, not " INT64_FORMAT, cell_id)));
	}
}

/*
 * A repeated call that found its work already done writes nothing, so its
 * commit would wait for no synchronous standby and answer success at once,
 * even when the first call's wait for the standbys was cancelled and its
 * work is on this server only (a failover would lose it). A commit waits
 * for the standbys when its transaction has a transaction id and wrote WAL:
 * a transactional logical message, empty, gives it both, and the standbys
 * then confirm everything up to its commit, the first call's work too
 * (replay does nothing with the message; logical decoding hands it to
 * output plugins as a message with prefix "claims.repeat"). A transaction
 * that has both already (a finish statement locked the lease row, or the
 * client's transaction wrote) logs nothing. Only repeats come here: a
 * first call costs what it did.
 */
void
claims_repeat_durable(void)
{
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()) &&
		XactLastRecEnd != InvalidXLogRecPtr)
		return;
#if PG_VERSION_NUM >= 170000
	(void) LogLogicalMessage("claims.repeat", "", 0, true, false);
#else
	(void) LogLogicalMessage("claims.repeat", "", 0, true);
#endif
}
