/*-------------------------------------------------------------------------
 *
 * reconcile.c
 *	  The store calls behind claims_cell.reconcile() (written in PL/pgSQL
 *	  in the extension script): list the cell's outstanding leases, and
 *	  commit or roll back one lease reporting the store's answer instead of
 *	  raising, so one failed lease does not stop a pass. Both go through
 *	  the backend's connection, deadline and circuit breaker
 *	  (connection.c). And the transactions a fence waits for: the virtual
 *	  transaction ids running when it was placed, and whether they ended.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_cell_store_list_leases);
PG_FUNCTION_INFO_V1(claims_cell_store_finish_lease);
PG_FUNCTION_INFO_V1(claims_cell_reconcile_settings);
PG_FUNCTION_INFO_V1(claims_cell_running_transactions);
PG_FUNCTION_INFO_V1(claims_cell_transactions_ended);

/* The proc number (17) or backend id (15, 16) of a virtual transaction id. */
#if PG_VERSION_NUM >= 170000
#define CELL_VXID_PROC(vxid)	((vxid).procNumber)
#else
#define CELL_VXID_PROC(vxid)	((vxid).backendId)
#endif

/*
 * store_list_leases(server name, request jsonb) returns jsonb: one page of
 * claims_list_leases. Raises what the store raises, 08006 when it cannot
 * be reached.
 */
Datum
claims_cell_store_list_leases(PG_FUNCTION_ARGS)
{
	cell_require_identity();
	PG_RETURN_DATUM(cell_call_listing(NameStr(*PG_GETARG_NAME(0)), PG_GETARG_DATUM(1),
									  "claims_list_leases",
									  "the claims store refused to list this cell's leases"));
}

/*
 * store_finish_lease(server name, cell_id bigint, lease uuid, commit boolean,
 * OUT sqlstate text, OUT message text): claims_commit or claims_rollback.
 * sqlstate is '00000' on success, the store's SQLSTATE when it refused
 * (55000: the lease was finished the other way, P0002: unknown lease), and
 * 08006 when the store could not be reached. Never raises for the store.
 */
Datum
claims_cell_store_finish_lease(PG_FUNCTION_ARGS)
{
	char	   *server = NameStr(*PG_GETARG_NAME(0));
	int64		cell_id = PG_GETARG_INT64(1);
	char	   *lease = DatumGetCString(DirectFunctionCall1(uuid_out, PG_GETARG_DATUM(2)));
	bool		commit = PG_GETARG_BOOL(3);
	char		idbuf[32];
	const char *params[2];
	CellCallResult r;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};

	cell_require_identity();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	cell_conn_prepare(cell_server_oid(server, false));
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) cell_id);
	params[0] = idbuf;
	params[1] = lease;
	cell_call_finish(commit ? "SELECT %s.claims_commit($1::bigint, $2::uuid)"
					 : "SELECT %s.claims_rollback($1::bigint, $2::uuid)",
					 2, params, true, &r);
	if (r.status == CELL_CALL_OK)
	{
		cell_stats_count(commit ? CELL_STAT_COMMITS : CELL_STAT_ROLLBACKS);
		values[0] = CStringGetTextDatum("00000");
		nulls[1] = true;
	}
	else
	{
		values[0] = CStringGetTextDatum(r.status == CELL_CALL_REMOTE_ERROR ? r.sqlstate : "08006");
		values[1] = CStringGetTextDatum(r.message ? r.message : "unknown failure");
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* A number of seconds as an interval. */
static Datum
cell_seconds(int s)
{
	char	   *txt = psprintf("%d seconds", s);

	return DirectFunctionCall3(interval_in, CStringGetDatum(txt),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
}

/*
 * reconcile_settings(OUT stale_after interval, OUT orphan_after interval,
 * OUT cleanup_after interval): the settings, read here so that they exist
 * even when the library was not preloaded.
 */
Datum
claims_cell_reconcile_settings(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = cell_seconds(cell_stale_after_s);
	values[1] = cell_seconds(cell_orphan_after_s);
	values[2] = cell_seconds(cell_cleanup_after_s);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * running_transactions() returns text[]: the virtual transaction ids
 * ("proc/local id", as pg_locks shows them) of every transaction running in
 * this database but the caller's, read from the proc array: unlike
 * pg_stat_activity, it shows every session whatever its role, its
 * track_activities or its kind (background workers too).
 */
Datum
claims_cell_running_transactions(PG_FUNCTION_ARGS)
{
	VirtualTransactionId *vxids;
	Datum	   *elems;
	int			n;

	/* vacuum and autovacuum run no triggers: they cannot take a lease */
	vxids = GetCurrentVirtualXIDs(InvalidTransactionId, false, false,
								  PROC_IN_VACUUM | PROC_IS_AUTOVACUUM, &n);
	elems = palloc(sizeof(Datum) * Max(n, 1));
	for (int i = 0; i < n; i++)
		elems[i] = CStringGetTextDatum(psprintf("%d/%u", (int) CELL_VXID_PROC(vxids[i]),
												vxids[i].localTransactionId));
	PG_RETURN_ARRAYTYPE_P(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/*
 * transactions_ended(vxids text[]) returns boolean: whether every one of
 * the virtual transactions (as running_transactions() gives them) has
 * ended. Tested on their virtual transaction id locks without waiting, as
 * CREATE INDEX CONCURRENTLY waits for older transactions.
 */
Datum
claims_cell_transactions_ended(PG_FUNCTION_ARGS)
{
	ArrayType  *arr = PG_GETARG_ARRAYTYPE_P(0);
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		VirtualTransactionId vxid;
		char	   *txt;
		int			proc;
		unsigned int lxid;
		char		extra;

		if (nulls[i])
			continue;
		txt = TextDatumGetCString(elems[i]);
		if (sscanf(txt, "%d/%u%c", &proc, &lxid, &extra) != 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("invalid virtual transaction id \"%s\"", txt)));
		CELL_VXID_PROC(vxid) = proc;
		vxid.localTransactionId = lxid;
		if (VirtualTransactionIdIsValid(vxid) && !VirtualXactLock(vxid, false))
			PG_RETURN_BOOL(false);
	}
	PG_RETURN_BOOL(true);
}
