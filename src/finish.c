/*-------------------------------------------------------------------------
 *
 * finish.c
 *	  claims_commit and claims_rollback: finishing a lease.
 *
 * A lease that only creates (the common case: signups, backfills) is
 * finished by one short statement, the floor's own: update the lease, then
 * its claims in the global row order. Any other lease, or one that is not
 * outstanding, goes to the general statement: it locks the lease row, then
 * its claim rows in the global row order, and applies the commit (creates
 * become ACTIVE, destroys go, replaces take their new metadata) or its
 * mirror image, or finds why the lease cannot be finished. Finishing a lease
 * the same way twice succeeds and changes nothing (but its commit waits for
 * synchronous standbys as the first one's did); finishing it the other
 * way fails loudly, so a late commit after reconciliation rolled the lease
 * back is never lost silently.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_commit);
PG_FUNCTION_INFO_V1(claims_rollback);
PG_FUNCTION_INFO_V1(claims_commit_request);
PG_FUNCTION_INFO_V1(claims_rollback_request);

/*
 * Commit (commit = true) or roll back the lease of (cell_id, lease_uuid),
 * inside an API call whose caller may act for the cell.
 */
static void
claims_finish_authorized(int64 cell_id, pg_uuid_t *lease_uuid, bool commit)
{
	const char *fname = commit ? "claims_commit" : "claims_rollback";
	Datum		args[2];
	int			ret;
	bool		isnull;
	int64		owner;
	char	   *state;
	char	   *uuid = claims_uuid_string(lease_uuid);
	bool		repeated;

	args[0] = UUIDPGetDatum(lease_uuid);
	args[1] = Int64GetDatum(cell_id);

	ret = claims_execute(commit ? CLAIMS_PLAN_COMMIT_CREATES : CLAIMS_PLAN_ROLLBACK_CREATES,
						 args, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: %s statement returned %s", fname, SPI_result_code_string(ret));
	if (SPI_processed == 1)
	{
		claims_stats_count_finish(commit, false);
		return;
	}

	ret = claims_execute(commit ? CLAIMS_PLAN_COMMIT : CLAIMS_PLAN_ROLLBACK, args, NULL, false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: %s statement returned %s", fname, SPI_result_code_string(ret));

	if (SPI_processed == 0)
	{
		claims_stats_count(CLAIMS_STAT_NOT_FOUND);
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("lease %s does not exist", uuid)));
	}

	owner = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	state = TextDatumGetCString(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

	if (owner != cell_id)
	{
		claims_stats_count(CLAIMS_STAT_OWNERSHIP);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease %s belongs to another cell", uuid)));
	}

	if (strcmp(state, "committed") == 0 && !commit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot roll back lease %s: it was already committed", uuid),
				 errhint("Undo a committed change with a new lease.")));
	if (strcmp(state, "rolled_back") == 0 && commit)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot commit lease %s: it was already rolled back", uuid),
				 errdetail("Its creates were released and its destroys undone; other cells may have claimed the values since."),
				 errhint("Claim the values again with a new lease.")));

	repeated = strcmp(state, "outstanding") != 0;
	if (repeated)
		claims_repeat_durable();
	claims_stats_count_finish(commit, repeated);
}

/*
 * Commit or roll back the lease of the (cell_id bigint, lease_uuid uuid)
 * arguments.
 */
static void
claims_finish_lease(FunctionCallInfo fcinfo, bool commit)
{
	ClaimsCall	call;
	int64		cell_id;
	pg_uuid_t  *lease_uuid;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("cell_id must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("lease_uuid must not be NULL")));
	claims_check_writable(commit ? "claims_commit" : "claims_rollback");
	cell_id = PG_GETARG_INT64(0);
	lease_uuid = PG_GETARG_UUID_P(1);
	claims_check_cell_id(cell_id);

	claims_spi_begin(fcinfo, &call);
	claims_authorize_cell(cell_id, false);
	claims_finish_authorized(cell_id, lease_uuid, commit);
	claims_spi_end(&call);
}

/*
 * Commit or roll back the lease a CommitUpdateRequest or
 * RollbackUpdateRequest (jsonb) names; returns the empty response, {}.
 */
static Jsonb *
claims_finish_request(FunctionCallInfo fcinfo, bool commit)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	int64		cell_id;
	pg_uuid_t	lease_uuid;
	ClaimsJson	js;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));
	claims_check_writable(commit ? "claims_commit" : "claims_rollback");

	claims_spi_begin(fcinfo, &call);
	claims_parse_finish(PG_GETARG_JSONB_P(0), &cell_id, &lease_uuid);
	claims_finish_authorized(cell_id, &lease_uuid, commit);
	claims_spi_end(&call);

	MemoryContextSwitchTo(caller);
	claims_json_init(&js);
	claims_json_begin_object(&js);
	claims_json_end_object(&js);
	return claims_json_finish(&js);
}

/*
 * claims_commit(cell_id bigint, lease_uuid uuid) returns void
 */
Datum
claims_commit(PG_FUNCTION_ARGS)
{
	claims_finish_lease(fcinfo, true);
	PG_RETURN_VOID();
}

/*
 * claims_rollback(cell_id bigint, lease_uuid uuid) returns void
 */
Datum
claims_rollback(PG_FUNCTION_ARGS)
{
	claims_finish_lease(fcinfo, false);
	PG_RETURN_VOID();
}

/*
 * claims_commit(request jsonb) returns jsonb: CommitUpdate as proto3 JSON.
 */
Datum
claims_commit_request(PG_FUNCTION_ARGS)
{
	PG_RETURN_JSONB_P(claims_finish_request(fcinfo, true));
}

/*
 * claims_rollback(request jsonb) returns jsonb: RollbackUpdate as proto3 JSON.
 */
Datum
claims_rollback_request(PG_FUNCTION_ARGS)
{
	PG_RETURN_JSONB_P(claims_finish_request(fcinfo, false));
}
