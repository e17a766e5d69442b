/*-------------------------------------------------------------------------
 *
 * call_frame.c
 *	  The frame every API call runs in: the calling role noted, the
 *	  extension's owner switched to, the search path pinned, SPI
 *	  connected; and given back at the call's end, or by the abort of the
 *	  (sub)transaction an error ended it in.
 *
 * While an API function runs, the search path is pinned to pg_catalog (up
 * to PostgreSQL 16 an override pushed on entry, popped on exit; from 17
 * search_path set at a GUC nesting level, see catalog_only_path), so
 * neither the statements (spi_plans.c) nor the C code resolve a name
 * through the caller's path.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"
#include "malloc_thresholds.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "miscadmin.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

/* API calls running in this backend (more than one: a call made from inside another's statements). */
int			claims_call_depth = 0;

/*
 * What each running call replaced, innermost last, and the subtransaction
 * it began in: a call's end gives its values back, and so does the abort of
 * the subtransaction it began in (an error a PL/pgSQL EXCEPTION block or a
 * savepoint catches), which ends it without reaching its end. Kept out of
 * the call's stack frame, which the error unwinds.
 */
typedef struct ClaimsCallFrame
{
	SubTransactionId subid;
	Oid			saved_caller_role;
	Oid			saved_nsp;
} ClaimsCallFrame;

static ClaimsCallFrame *call_frames = NULL;
static int	call_frames_allocated = 0;

/*
 * The search path of every API call: pg_catalog, nothing else.
 *
 * Up to PostgreSQL 16 an override search path does it: no GUC work, and the
 * override leaves out the temporary schema entirely. PostgreSQL 17 removed
 * overrides; there the call sets search_path at a new GUC nesting level, as
 * a function's SET clause does, and restores it on exit (an error restores
 * it through (sub)transaction abort). The value names pg_temp last: a
 * search_path that does not mention pg_temp searches it FIRST for relations
 * and types, so "pg_catalog" alone would let a temporary type shadow a
 * catalog one; last, it can only supply names pg_catalog lacks, and every
 * relation the statements use is schema-qualified.
 */
#if PG_VERSION_NUM < 170000
static OverrideSearchPath catalog_only_path = {NIL, true, false, 0};
#else
#define CLAIMS_CALL_SEARCH_PATH "pg_catalog, pg_temp"
#endif
Oid			claims_caller_role = InvalidOid;
static Oid	claims_current_nsp = InvalidOid;

/*
 * Note a call's start: what it is about to replace, and where it began.
 */
static void
claims_call_push(void)
{
	if (claims_call_depth >= call_frames_allocated)
	{
		int			n = Max(8, call_frames_allocated * 2);

		call_frames = call_frames == NULL
			? MemoryContextAlloc(TopMemoryContext, sizeof(ClaimsCallFrame) * n)
			: repalloc(call_frames, sizeof(ClaimsCallFrame) * n);
		call_frames_allocated = n;
	}
	call_frames[claims_call_depth].subid = GetCurrentSubTransactionId();
	call_frames[claims_call_depth].saved_caller_role = claims_caller_role;
	call_frames[claims_call_depth].saved_nsp = claims_current_nsp;
	claims_call_depth++;
}

/*
 * End the calls that began in subtransaction subid or later (all of them
 * for TopSubTransactionId), innermost first, giving back what each replaced.
 */
static void
claims_calls_unwind(SubTransactionId subid)
{
	while (claims_call_depth > 0 && call_frames[claims_call_depth - 1].subid >= subid)
	{
		claims_call_depth--;
		claims_caller_role = call_frames[claims_call_depth].saved_caller_role;
		claims_current_nsp = call_frames[claims_call_depth].saved_nsp;
	}
}

/*
 * An aborted subtransaction ends the calls that began inside it: without
 * this, the caller role and schema of a call whose error was caught would
 * stay in force, and the depth would count it as running until the
 * transaction ends.
 */
static void
claims_call_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
							 SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		claims_calls_unwind(mySubid);
}

/*
 * At the end of a transaction no API call runs: end those an error left
 * behind, and let the plans free what they retired.
 */
static void
claims_call_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			claims_calls_unwind(TopSubTransactionId);
			claims_plans_xact_end();
			break;
		default:
			break;
	}
}

/* Register the call frame's (sub)transaction callbacks (from _PG_init). */
void
claims_call_init(void)
{
	RegisterXactCallback(claims_call_xact_callback, NULL);
	RegisterSubXactCallback(claims_call_subxact_callback, NULL);
}

/*
 * Start an API call: note the calling role, switch to the extension's owner
 * (the owner of the called function) for the statements, pin the search
 * path to pg_catalog, connect to SPI, note the extension's schema and pin
 * the version of the registries this call reads. The functions are not
 * SECURITY DEFINER: the role judged is the one that called them, whoever it
 * is running as. The pinned path leaves out pg_temp, so no temporary object
 * of the caller can stand in for a catalog one.
 */
void
claims_spi_begin(FunctionCallInfo fcinfo, ClaimsCall *call)
{
	HeapTuple	proctup;
	Oid			nsp;
	Oid			owner;

	claims_set_malloc_thresholds();
	proctup = SearchSysCache1(PROCOID, ObjectIdGetDatum(fcinfo->flinfo->fn_oid));
	if (!HeapTupleIsValid(proctup))
		elog(ERROR, "cache lookup failed for function %u", fcinfo->flinfo->fn_oid);
	nsp = ((Form_pg_proc) GETSTRUCT(proctup))->pronamespace;
	owner = ((Form_pg_proc) GETSTRUCT(proctup))->proowner;
	ReleaseSysCache(proctup);

	claims_call_push();
	claims_caller_role = GetUserId();
	GetUserIdAndSecContext(&call->saved_userid, &call->saved_sec_context);
	SetUserIdAndSecContext(owner, call->saved_sec_context | SECURITY_LOCAL_USERID_CHANGE);
#if PG_VERSION_NUM < 170000
	PushOverrideSearchPath(&catalog_only_path);
#else
	call->guc_nest_level = NewGUCNestLevel();
	(void) set_config_option("search_path", CLAIMS_CALL_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
#endif

	/* see registry, cell and schema changes committed since the last call */
	AcceptInvalidationMessages();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims: SPI_connect failed");

	claims_current_nsp = nsp;
	claims_plans_check_schema(nsp);
	claims_registry_pin();
}

/*
 * Finish an API call: disconnect from SPI, give back the caller's search
 * path and return to the caller's role. (An error restores all of it
 * through (sub)transaction abort: PostgreSQL's own state by itself, the
 * caller role, schema and depth by claims_plans_subxact_callback.)
 */
void
claims_spi_end(ClaimsCall *call)
{
	SPI_finish();
#if PG_VERSION_NUM < 170000
	PopOverrideSearchPath();
#else
	AtEOXact_GUC(true, call->guc_nest_level);
#endif
	SetUserIdAndSecContext(call->saved_userid, call->saved_sec_context);
	if (claims_call_depth > 0)
	{
		claims_call_depth--;
		claims_caller_role = call_frames[claims_call_depth].saved_caller_role;
		claims_current_nsp = call_frames[claims_call_depth].saved_nsp;
	}
}

/* The schema the extension lives in. */
Oid
claims_schema_oid(void)
{
	return claims_current_nsp;
}
