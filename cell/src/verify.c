/*-------------------------------------------------------------------------
 *
 * verify.c
 *	  The store calls behind claims_cell.verify() (written in PL/pgSQL in
 *	  the extension script): one page of the cell's records over a source
 *	  id range, and one lease of repairs taken inside the caller's
 *	  transaction. Both go through the backend's connection, deadline and
 *	  circuit breaker (connection.c).
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_cell_store_list_records);
PG_FUNCTION_INFO_V1(claims_cell_store_repair_lease);
PG_FUNCTION_INFO_V1(claims_cell_verify_settings);
PG_FUNCTION_INFO_V1(claims_cell_store_get_record);

/*
 * store_list_records(server name, request jsonb) returns jsonb: one page
 * of claims_list_records. Raises what the store raises, 08006 when it
 * cannot be reached.
 */
Datum
claims_cell_store_list_records(PG_FUNCTION_ARGS)
{
	cell_require_identity();
	PG_RETURN_DATUM(cell_call_listing(NameStr(*PG_GETARG_NAME(0)), PG_GETARG_DATUM(1),
									  "claims_list_records",
									  "the claims store refused to list this cell's records"));
}

/*
 * store_repair_lease(server name, cell_id bigint, creates jsonb, destroys
 * jsonb, OUT lease uuid, OUT sqlstate text, OUT message text): take one
 * lease of repairs, committed at the store by the caller's COMMIT. sqlstate
 * is '00000' with the lease, else the store's refusal (23505, 55P03, ...)
 * and no lease. Raises when the store cannot be reached.
 */
Datum
claims_cell_store_repair_lease(PG_FUNCTION_ARGS)
{
	char	   *server = NameStr(*PG_GETARG_NAME(0));
	int64		cell_id = PG_GETARG_INT64(1);
	char	   *creates = DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(2)));
	char	   *destroys = DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(3)));
	char		lease[UUID_LEN * 2 + 5];
	CellCallResult r;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	cell_require_identity();

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	cell_conn_prepare(cell_server_oid(server, false));
	if (cell_take_repair_lease(cell_id, creates, destroys, lease, &r))
	{
		values[0] = DirectFunctionCall1(uuid_in, CStringGetDatum(lease));
		values[1] = CStringGetTextDatum("00000");
		nulls[2] = true;
	}
	else
	{
		nulls[0] = true;
		values[1] = CStringGetTextDatum(r.sqlstate);
		values[2] = CStringGetTextDatum(r.message ? r.message : "unknown failure");
	}
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * store_get_record(server name, request jsonb) returns jsonb: the store's
 * claims_get_record, {"record": ...} or NULL when the value is not claimed.
 * Raises what the store raises, 08006 when it cannot be reached.
 */
Datum
claims_cell_store_get_record(PG_FUNCTION_ARGS)
{
	const char *params[1];
	CellCallResult r;

	cell_require_identity();

	cell_conn_prepare(cell_server_oid(NameStr(*PG_GETARG_NAME(0)), false));
	params[0] = DatumGetCString(DirectFunctionCall1(jsonb_out, PG_GETARG_DATUM(1)));
	cell_call("SELECT %s.claims_get_record($1::jsonb)", 1, params, true, &r);
	if (r.status == CELL_CALL_REMOTE_ERROR)
		cell_raise_remote(&r, "the claims store refused to look up a record");
	if (r.status != CELL_CALL_OK)
		cell_raise_unreachable(&r);
	if (r.value == NULL)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(r.value)));
}

/* A number of seconds as an interval. */
static Datum
cell_interval_s(int s)
{
	return DirectFunctionCall3(interval_in, CStringGetDatum(psprintf("%d seconds", s)),
							   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
}

/*
 * verify_settings(OUT verify_recent interval, OUT verify_interval interval,
 * OUT max_batch_size integer): read here so that they exist even when the
 * library was not preloaded.
 */
Datum
claims_cell_verify_settings(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = cell_interval_s(cell_verify_recent_s);
	values[1] = cell_interval_s(cell_verify_interval_s);
	values[2] = Int32GetDatum(cell_max_batch_size);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}
