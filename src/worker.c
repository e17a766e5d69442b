/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The stale lease reporter: background workers that report leases left
 *	  outstanding too long and prune old lease history.
 *
 * Every claims.report_interval a cycle looks, in the database named by
 * claims.database, for outstanding leases older than
 * claims.stale_lease_threshold. Per cell it logs one WARNING (again only
 * when the count or the oldest lease changes, or as a reminder every
 * claims.report_repeat), logs once when the cell has none left, and sends
 * NOTIFY claims_stale_leases with a JSON payload every cycle so that a
 * reconciler can LISTEN. Then it deletes finished leases older than
 * claims.lease_history_retention, a small batch per transaction.
 *
 * As with autoprewarm and the autovacuum launcher, nothing holds on to the
 * database between cycles. The launcher, registered at server start,
 * connects to no database and reads only the shared catalog pg_database.
 * Every interval it checks that claims.database exists and accepts
 * connections, then starts a cycle worker (a dynamic background worker)
 * that connects to it, runs one cycle and exits. DROP DATABASE and CREATE
 * DATABASE ... TEMPLATE therefore wait at most for one short cycle: a cycle
 * stops between two transactions when such a command waits for the
 * database, and the launcher starts none while one is under way. While the
 * database is missing the launcher says so once and starts no cycles; it
 * says so again when the database is back. What the reporter last logged about each cell
 * lives in a dynamic shared memory area of the launcher that every cycle
 * reads and updates, so a new process per cycle does not repeat itself.
 *
 * A cycle reads with plain SELECTs and deletes only finished leases,
 * skipping rows somebody holds, under a short lock_timeout and a statement
 * timeout, so it never holds up the API. It waits quietly while the
 * extension is missing from its database, looks the extension up again in
 * every transaction (so DROP and CREATE EXTENSION while it runs are fine),
 * and no cycle runs while the server is a hot standby. An error ends the
 * cycle worker only; the launcher starts the next cycle one interval later
 * as usual. If the launcher itself ends, the postmaster starts it again
 * after bgw_restart_time, with a fresh memory of the cells; when a cycle of
 * its predecessor did not finish, the new launcher waits one interval
 * before its first cycle, so a persistent error cannot loop fast.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"
#include "bgw_database.h"

#include <limits.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_database.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/lwlock.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/dsa.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"

#define CLAIMS_WORKER_NAME			"claims stale lease reporter"
#define CLAIMS_CYCLE_NAME			"claims stale lease reporter cycle"
#define CLAIMS_NOTIFY_CHANNEL		"claims_stale_leases"
#define CLAIMS_PRUNE_BATCH			1000
#define CLAIMS_PRUNE_MAX_BATCHES	100
#define CLAIMS_WORKER_LOCK_TIMEOUT	"5s"
#define CLAIMS_WORKER_STMT_TIMEOUT_MS 60000
#define CLAIMS_WORKER_MAX_SLEEP_MS	3600000L
#define CLAIMS_WORKER_AREA_SIZE		(64 * 1024) /* to start with; it grows */

/* Settings (seconds). */
int			claims_stale_lease_threshold = 600;
int			claims_report_interval = 60;
int			claims_report_repeat = 600;
int			claims_lease_history_retention = 7 * SECS_PER_DAY;
char	   *claims_database = NULL;

/* What the worker last logged about a cell with stale leases. */
typedef struct ClaimsStaleCell
{
	int64		cell_id;		/* hash key */
	int64		count;
	pg_uuid_t	oldest;
	TimestampTz last_logged;
	bool		seen;			/* found in the current cycle */
} ClaimsStaleCell;

/*
 * What one cycle leaves for the next, at the start of the launcher's
 * dynamic shared memory segment; a dsa area fills the rest.
 */
typedef struct ClaimsReporterState
{
	bool		logged_missing; /* said that the extension is missing */
	int			ncells;
	dsa_pointer cells;			/* ClaimsStaleCell[ncells] */
} ClaimsReporterState;

#define CLAIMS_STATE_SIZE	MAXALIGN(sizeof(ClaimsReporterState))

/* What the launcher hands a cycle worker in bgw_extra. */
typedef struct ClaimsCycleArgs
{
	Oid			dboid;
	int			tranche_id;
	dsm_handle	segment;
} ClaimsCycleArgs;

StaticAssertDecl(sizeof(ClaimsCycleArgs) <= BGW_EXTRALEN,
				 "ClaimsCycleArgs does not fit in bgw_extra");

/* Cycle worker: the cells as the last cycle left them, while it runs. */
static HTAB *stale_cells = NULL;
static bool logged_missing = false;

/* Launcher. */
static dsm_segment *reporter_segment = NULL;
static ClaimsReporterState *reporter_state = NULL;
static dsa_area *reporter_area = NULL;
static int	reporter_tranche = 0;
static Oid	reporter_dboid = InvalidOid;	/* the database the state is of */
static ClaimsBgwDatabaseState database_state = CLAIMS_BGW_DB_AVAILABLE;
static bool logged_standby = false;
static bool logged_no_slot = false;

/* One row per cell: count, oldest lease, its age and the NOTIFY payload. */
static const char *const stale_sql =
"SELECT DISTINCT ON (l.creator_id) l.creator_id,"
"       count(*) OVER (PARTITION BY l.creator_id),"
"       l.uuid, l.created_at,"
"       date_trunc('second', now() - l.created_at)::text,"
"       json_build_object('cell_id', l.creator_id,"
"                         'count', count(*) OVER (PARTITION BY l.creator_id),"
"                         'oldest_lease_uuid', l.uuid,"
"                         'oldest_created_at', l.created_at)::text"
"  FROM %s.claim_leases l"
" WHERE l.state = 'outstanding'"
"   AND l.created_at < now() - make_interval(secs => $1)"
" ORDER BY l.creator_id, l.created_at, l.uuid";

/* One batch of finished leases past the retention, oldest first. */
static const char *const prune_sql =
"DELETE FROM %s.claim_leases"
" WHERE uuid = ANY (ARRAY(SELECT uuid FROM %s.claim_leases"
"                          WHERE state <> 'outstanding'"
"                            AND finished_at < now() - make_interval(secs => $1)"
"                          ORDER BY finished_at LIMIT $2"
"                          FOR UPDATE SKIP LOCKED))"
"   AND state <> 'outstanding'";

/*
 * Define the reloadable settings; these exist with or without
 * shared_preload_libraries (the claims_stale_leases view reads one).
 */
void
claims_worker_define_gucs(void)
{
	DefineCustomIntVariable("claims.stale_lease_threshold",
							"Age at which an outstanding lease counts as stale.",
							"Used by the claims_stale_leases view and the stale lease reporter.",
							&claims_stale_lease_threshold,
							600, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims.report_interval",
							"Time between two runs of the stale lease reporter.",
							NULL,
							&claims_report_interval,
							60, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims.report_repeat",
							"Time after which an unchanged stale lease report is logged again.",
							NULL,
							&claims_report_repeat,
							600, 1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims.lease_history_retention",
							"Age of finished leases at which the stale lease reporter deletes them.",
							"-1 keeps finished leases forever.",
							&claims_lease_history_retention,
							7 * SECS_PER_DAY, -1, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
}

/*
 * Define claims.database and register the launcher; called from _PG_init
 * only while shared_preload_libraries is being processed.
 */
void
claims_worker_register(void)
{
	BackgroundWorker worker;

	DefineCustomStringVariable("claims.database",
							   "Database the stale lease reporter works in.",
							   NULL,
							   &claims_database,
							   "postgres",
							   PGC_POSTMASTER, 0,
							   NULL, NULL, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, "claims", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "claims_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, CLAIMS_WORKER_NAME, BGW_MAXLEN);
	strlcpy(worker.bgw_type, CLAIMS_WORKER_NAME, BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = 0;
	RegisterBackgroundWorker(&worker);
}

/*
 * Create the launcher's dynamic shared memory: the state a cycle leaves for
 * the next, and a dsa area for the cells. It goes away with the launcher.
 */
static void
claims_worker_create_state(void)
{
	reporter_segment = dsm_create(CLAIMS_STATE_SIZE + dsa_minimum_size() +
								  CLAIMS_WORKER_AREA_SIZE, 0);
	dsm_pin_mapping(reporter_segment);
	reporter_state = dsm_segment_address(reporter_segment);
	reporter_state->logged_missing = false;
	reporter_state->ncells = 0;
	reporter_state->cells = InvalidDsaPointer;

	reporter_tranche = LWLockNewTrancheId();
	LWLockRegisterTranche(reporter_tranche, CLAIMS_WORKER_NAME);
	reporter_area = dsa_create_in_place((char *) reporter_state + CLAIMS_STATE_SIZE,
										dsa_minimum_size() + CLAIMS_WORKER_AREA_SIZE,
										reporter_tranche, reporter_segment);
	dsa_pin_mapping(reporter_area);
}

/*
 * Forget what was logged (the database is gone or another one): cycles in
 * the next database start afresh. Only the launcher calls this, while no
 * cycle worker runs.
 */
static void
claims_worker_reset_state(void)
{
	if (DsaPointerIsValid(reporter_state->cells))
		dsa_free(reporter_area, reporter_state->cells);
	reporter_state->cells = InvalidDsaPointer;
	reporter_state->ncells = 0;
	reporter_state->logged_missing = false;
}

/* Cycle worker: read what the previous cycle left. */
static void
claims_worker_load_state(dsa_area *area, ClaimsReporterState *state)
{
	HASHCTL		ctl;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(ClaimsStaleCell);
	stale_cells = hash_create("claims stale cells", Max(state->ncells, 64), &ctl,
							  HASH_ELEM | HASH_BLOBS);

	if (state->ncells > 0)
	{
		ClaimsStaleCell *cells = dsa_get_address(area, state->cells);

		for (int i = 0; i < state->ncells; i++)
		{
			ClaimsStaleCell *cell = hash_search(stale_cells, &cells[i].cell_id,
												HASH_ENTER, NULL);

			*cell = cells[i];
		}
	}
	logged_missing = state->logged_missing;
}

/* Cycle worker: leave what this cycle logged for the next one. */
static void
claims_worker_save_state(dsa_area *area, ClaimsReporterState *state)
{
	long		ncells = hash_get_num_entries(stale_cells);
	dsa_pointer cells = InvalidDsaPointer;

	if (ncells > 0)
	{
		ClaimsStaleCell *out;
		HASH_SEQ_STATUS status;
		ClaimsStaleCell *cell;
		int			i = 0;

		cells = dsa_allocate(area, mul_size(ncells, sizeof(ClaimsStaleCell)));
		out = dsa_get_address(area, cells);
		hash_seq_init(&status, stale_cells);
		while ((cell = hash_seq_search(&status)) != NULL)
			out[i++] = *cell;
	}
	if (DsaPointerIsValid(state->cells))
		dsa_free(area, state->cells);
	state->cells = cells;
	state->ncells = (int) ncells;
	state->logged_missing = logged_missing;
}

/*
 * Launcher: look claims.database up in pg_database, and log when a cycle
 * becomes impossible there or possible again. Returns its OID, or
 * InvalidOid when no cycle can run.
 */
static Oid
claims_worker_find_database(void)
{
	Oid			dboid;
	ClaimsBgwDatabaseState state = claims_bgw_find_database(claims_database, &dboid);

	if (state != database_state)
	{
		if (state == CLAIMS_BGW_DB_MISSING)
			ereport(LOG,
					(errcode(ERRCODE_UNDEFINED_DATABASE),
					 errmsg("claims: database \"%s\" does not exist; stale lease reports wait until it is created",
							claims_database)));
		else if (state == CLAIMS_BGW_DB_NO_CONNECTIONS)
			ereport(LOG,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("claims: database \"%s\" does not allow connections; stale lease reports wait until it does",
							claims_database)));
		else
			ereport(LOG,
					(errmsg("claims: database \"%s\" is available again; stale lease reports resume",
							claims_database)));
		database_state = state;
	}

	/* a dropped database's cells mean nothing in its successor */
	if (state == CLAIMS_BGW_DB_MISSING || (OidIsValid(dboid) && dboid != reporter_dboid))
	{
		claims_worker_reset_state();
		reporter_dboid = dboid;
	}
	return dboid;
}

/*
 * The schema of the claims extension, or InvalidOid when it is not
 * installed. The extension is locked against DROP EXTENSION until the
 * transaction ends, and looked up again after the lock is granted in case a
 * DROP committed while we waited.
 */
static Oid
claims_worker_find_schema(void)
{
	Oid			extoid = get_extension_oid("claims", true);
	Oid			nsp = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(extoid))
		return InvalidOid;
	LockDatabaseObject(ExtensionRelationId, extoid, 0, AccessShareLock);
	InvalidateCatalogSnapshot();

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		nsp = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return nsp;
}

/*
 * Start one unit of work: transaction, snapshot, SPI, a short lock_timeout,
 * a statement timeout and a pinned search_path. Returns the quoted name of
 * the extension's schema, or NULL when the extension is not installed.
 */
static const char *
claims_worker_begin(const char *activity)
{
	Oid			nsp;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims: SPI_connect failed");
	pgstat_report_activity(STATE_RUNNING, activity);

	(void) set_config_option("lock_timeout", CLAIMS_WORKER_LOCK_TIMEOUT,
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
							 true, 0, false);
	enable_timeout_after(STATEMENT_TIMEOUT, CLAIMS_WORKER_STMT_TIMEOUT_MS);

	nsp = claims_worker_find_schema();
	if (!OidIsValid(nsp))
		return NULL;
	return quote_identifier(get_namespace_name(nsp));
}

/* End a unit of work started by claims_worker_begin. */
static void
claims_worker_end(void)
{
	disable_timeout(STATEMENT_TIMEOUT, false);
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(true);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Forget every cell (the extension and its leases are gone). */
static void
claims_worker_forget_cells(void)
{
	HASH_SEQ_STATUS status;
	ClaimsStaleCell *cell;

	hash_seq_init(&status, stale_cells);
	while ((cell = hash_seq_search(&status)) != NULL)
		(void) hash_search(stale_cells, &cell->cell_id, HASH_REMOVE, NULL);
}

/*
 * Find the stale leases, log what changed, notify listeners and publish the
 * totals. Returns false when the extension is not installed.
 */
static bool
claims_worker_report(void)
{
	const char *schema = claims_worker_begin("claims: looking for stale leases");
	Oid			argtypes[1] = {FLOAT8OID};
	Datum		args[1];
	TimestampTz now;
	int64		total = 0;
	int64		oldest_age = -1;
	int			ret;
	HASH_SEQ_STATUS status;
	ClaimsStaleCell *cell;
	int64	   *cell_ids;
	int64	   *counts;
	int64	   *ages;

	if (schema == NULL)
	{
		claims_worker_end();
		claims_worker_forget_cells();
		if (!logged_missing)
			ereport(LOG,
					(errmsg("claims: extension \"claims\" is not installed in database \"%s\"; stale lease reports start after CREATE EXTENSION claims",
							claims_database)));
		logged_missing = true;
		return false;
	}
	logged_missing = false;

	args[0] = Float8GetDatum((float8) claims_stale_lease_threshold);
	ret = SPI_execute_with_args(psprintf(stale_sql, schema), 1, argtypes, args,
								NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: stale lease query returned %s", SPI_result_code_string(ret));
	now = GetCurrentTransactionStartTimestamp();
	cell_ids = palloc(sizeof(int64) * (SPI_processed + 1));
	counts = palloc(sizeof(int64) * (SPI_processed + 1));
	ages = palloc(sizeof(int64) * (SPI_processed + 1));

	hash_seq_init(&status, stale_cells);
	while ((cell = hash_seq_search(&status)) != NULL)
		cell->seen = false;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		cell_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		int64		count = DatumGetInt64(SPI_getbinval(tup, desc, 2, &isnull));
		pg_uuid_t  *uuid = DatumGetUUIDP(SPI_getbinval(tup, desc, 3, &isnull));
		TimestampTz created = DatumGetTimestampTz(SPI_getbinval(tup, desc, 4, &isnull));
		bool		found;

		total += count;
		oldest_age = Max(oldest_age, now - created);
		cell_ids[i] = cell_id;
		counts[i] = count;
		ages[i] = now - created;

		cell = hash_search(stale_cells, &cell_id, HASH_ENTER, &found);
		if (!found || cell->count != count ||
			memcmp(cell->oldest.data, uuid->data, UUID_LEN) != 0 ||
			now - cell->last_logged >= (int64) claims_report_repeat * USECS_PER_SEC)
		{
			ereport(WARNING,
					(errmsg_plural("claims: cell %lld has %lld stale lease; the oldest, %s, is %s old",
								   "claims: cell %lld has %lld stale leases; the oldest, %s, is %s old",
								   (unsigned long) count,
								   (long long) cell_id, (long long) count,
								   claims_uuid_string(uuid),
								   SPI_getvalue(tup, desc, 5))));
			cell->count = count;
			cell->oldest = *uuid;
			cell->last_logged = now;
		}
		cell->seen = true;
		Async_Notify(CLAIMS_NOTIFY_CHANNEL, SPI_getvalue(tup, desc, 6));
	}

	hash_seq_init(&status, stale_cells);
	while ((cell = hash_seq_search(&status)) != NULL)
	{
		if (cell->seen)
			continue;
		ereport(LOG,
				(errmsg("claims: cell %lld has no stale leases any more",
						(long long) cell->cell_id)));
		(void) hash_search(stale_cells, &cell->cell_id, HASH_REMOVE, NULL);
	}

	claims_stats_worker_report_cells((int) SPI_processed, cell_ids, counts, ages);
	claims_worker_end();
	claims_stats_worker_report(now, total, oldest_age);
	return true;
}

/*
 * Delete finished leases past the retention, one small batch per
 * transaction, never outstanding ones.
 */
static void
claims_worker_prune(void)
{
	Oid			argtypes[2] = {FLOAT8OID, INT4OID};
	Datum		args[2];
	uint64		total = 0;

	if (claims_lease_history_retention < 0)
		return;

	for (int batch = 0; batch < CLAIMS_PRUNE_MAX_BATCHES; batch++)
	{
		const char *schema;
		uint64		deleted;
		int			ret;

		if (claims_bgw_database_wanted(MyDatabaseId))
		{
			ereport(DEBUG1,
					(errmsg("claims: lease history pruning stops early: another session waits for database \"%s\"",
							claims_database)));
			break;
		}
		schema = claims_worker_begin("claims: pruning lease history");
		if (schema == NULL)
		{
			claims_worker_end();
			break;
		}
		args[0] = Float8GetDatum((float8) claims_lease_history_retention);
		args[1] = Int32GetDatum(CLAIMS_PRUNE_BATCH);
		ret = SPI_execute_with_args(psprintf(prune_sql, schema, schema), 2, argtypes,
									args, NULL, false, 0);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "claims: lease history pruning returned %s", SPI_result_code_string(ret));
		deleted = SPI_processed;
		claims_worker_end();

		total += deleted;
		if (deleted < CLAIMS_PRUNE_BATCH)
			break;
		CHECK_FOR_INTERRUPTS();
	}

	if (total > 0)
		ereport(DEBUG1,
				(errmsg("claims: deleted %llu finished leases older than claims.lease_history_retention",
						(unsigned long long) total)));
}

/*
 * Launcher: start a cycle worker for the database and wait until it has
 * exited.
 */
static void
claims_worker_run_cycle(Oid dboid)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	ClaimsCycleArgs args;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_ConsistentState;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "claims", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "claims_worker_cycle_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, CLAIMS_CYCLE_NAME, BGW_MAXLEN);
	strlcpy(worker.bgw_type, CLAIMS_CYCLE_NAME, BGW_MAXLEN);
	worker.bgw_main_arg = (Datum) 0;
	worker.bgw_notify_pid = MyProcPid;
	memset(&args, 0, sizeof(args));
	args.dboid = dboid;
	args.tranche_id = reporter_tranche;
	args.segment = dsm_segment_handle(reporter_segment);
	memcpy(worker.bgw_extra, &args, sizeof(args));

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		if (!logged_no_slot)
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("claims: could not start a stale lease report: no background worker slot is free"),
					 errhint("Raise max_worker_processes.")));
		logged_no_slot = true;
		return;
	}
	logged_no_slot = false;

	if (WaitForBackgroundWorkerShutdown(handle) == BGWH_POSTMASTER_DIED)
		proc_exit(1);
	pfree(handle);

	/* a cycle that did not finish has logged why; the next one is due as usual */
	if (claims_stats_worker_interrupted())
		claims_stats_worker_cycle(false);
}

/*
 * Launcher: one cycle, unless the server is a hot standby or the database
 * is unavailable or wanted by a command that needs it alone.
 */
static void
claims_worker_launch(void)
{
	Oid			dboid;

	if (RecoveryInProgress())
	{
		if (!logged_standby)
			ereport(LOG,
					(errmsg("claims: the server is a hot standby; stale lease reports and lease history pruning wait for promotion")));
		logged_standby = true;
		return;
	}
	if (logged_standby)
		ereport(LOG,
				(errmsg("claims: the server was promoted; stale lease reports and lease history pruning start")));
	logged_standby = false;

	dboid = claims_worker_find_database();
	if (!OidIsValid(dboid))
		return;
	if (claims_bgw_database_wanted(dboid))
	{
		ereport(DEBUG1,
				(errmsg("claims: stale lease report skipped: another session waits for database \"%s\"",
						claims_database)));
		return;
	}
	claims_worker_run_cycle(dboid);
}

/*
 * Entry point of a cycle worker: connect to the database the launcher
 * found, report, prune, and exit.
 */
void
claims_worker_cycle_main(Datum main_arg)
{
	ClaimsCycleArgs args;
	dsm_segment *seg;
	ClaimsReporterState *state;
	dsa_area   *area;
	bool		installed = false;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	seg = dsm_attach(args.segment);
	if (seg == NULL)
	{
		/* the launcher exited before this worker started: nothing to do */
		ereport(DEBUG1,
				(errmsg("claims: stale lease report not run: its launcher has exited")));
		return;
	}
	dsm_pin_mapping(seg);
	LWLockRegisterTranche(args.tranche_id, CLAIMS_WORKER_NAME);
	state = dsm_segment_address(seg);
	area = dsa_attach_in_place((char *) state + CLAIMS_STATE_SIZE, seg);
	dsa_pin_mapping(area);

	BackgroundWorkerInitializeConnectionByOid(args.dboid, InvalidOid, 0);
	pgstat_report_appname(CLAIMS_CYCLE_NAME);

	claims_stats_worker_cycle(true);
	if (claims_bgw_database_wanted(MyDatabaseId))
		ereport(DEBUG1,
				(errmsg("claims: stale lease report skipped: another session waits for database \"%s\"",
						claims_database)));
	else
	{
		claims_worker_load_state(area, state);
		installed = claims_worker_report();
		claims_worker_save_state(area, state);
	}
	if (installed)
		claims_worker_prune();
	claims_stats_worker_cycle(false);
}

/*
 * Entry point of the launcher.
 */
void
claims_worker_main(Datum main_arg)
{
	TimestampTz last_start = 0;
	TimestampTz next_run;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* shared catalogs only: the launcher holds no database */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname(CLAIMS_WORKER_NAME);
	claims_worker_create_state();

	next_run = GetCurrentTimestamp();
	if (claims_stats_worker_interrupted())
	{
		/* a cycle of the previous launcher did not finish: do not retry at once */
		last_start = next_run;
		next_run = TimestampTzPlusMilliseconds(next_run, (int64) claims_report_interval * 1000);
		claims_stats_worker_cycle(false);
		ereport(LOG,
				(errmsg("claims: the previous stale lease reporter stopped during a cycle; the next cycle starts after claims.report_interval")));
	}

	for (;;)
	{
		TimestampTz now;
		long		delay;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (last_start != 0)
				next_run = TimestampTzPlusMilliseconds(last_start,
													   (int64) claims_report_interval * 1000);
		}

		now = GetCurrentTimestamp();
		if (now >= next_run)
		{
			last_start = now;
			claims_worker_launch();
			next_run = TimestampTzPlusMilliseconds(last_start,
												   (int64) claims_report_interval * 1000);
			now = GetCurrentTimestamp();
		}

		delay = Min(TimestampDifferenceMilliseconds(now, next_run), CLAIMS_WORKER_MAX_SLEEP_MS);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 delay, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
