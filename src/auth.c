/*-------------------------------------------------------------------------
 *
 * auth.c
 *	  Cell identity: which database role may act for which cell.
 *
 * Each cell is registered in claim_cells with the role it connects as.
 * A call for cell N is accepted only from a session whose role has the
 * privileges of cell N's role, or from an administrator (a member of
 * claims_admin, or a superuser). The role judged is the session's current
 * role outside any SECURITY DEFINER function (GetOuterUserId), so the
 * extension's own definer rights never count. Unregistered cells are
 * refused, and disabled cells to all but administrators, unless
 * claims.open_mode is on.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(claims_require_admin);
PG_FUNCTION_INFO_V1(claims_caller);

bool		claims_open_mode = false;

typedef struct ClaimsCell
{
	int64		cell_id;
	char	   *role_name;
	bool		disabled;
} ClaimsCell;

static MemoryContext cells_cxt = NULL;
static bool cells_valid = false;
static Oid	cells_schema = InvalidOid;
static Oid	cells_relid = InvalidOid;
static ClaimsCell *cells = NULL;
static int	ncells = 0;

/*
 * Drop the cached cell list when claim_cells (or everything) changes.
 */
static void
claims_cells_invalidate(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == cells_relid)
		cells_valid = false;
}

/*
 * Register the invalidation callback once per backend.
 */
void
claims_auth_init(void)
{
	CacheRegisterRelcacheCallback(claims_cells_invalidate, (Datum) 0);
}

/*
 * Load claim_cells into the per-backend cache; needs an SPI connection.
 */
static void
claims_cells_ensure(void)
{
	int			ret;

	if (cells_valid && cells_schema == claims_schema_oid())
		return;

	if (cells_cxt == NULL)
		cells_cxt = AllocSetContextCreate(TopMemoryContext, "claims cells",
										  ALLOCSET_SMALL_SIZES);
	else
		MemoryContextReset(cells_cxt);
	cells = NULL;
	ncells = 0;

	cells_valid = true;
	cells_schema = claims_schema_oid();
	cells_relid = get_relname_relid("claim_cells", cells_schema);
	PG_TRY();
	{
		ret = SPI_execute_plan(claims_plan(CLAIMS_PLAN_CELLS), NULL, NULL, true, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "claims: loading claim_cells failed: %s", SPI_result_code_string(ret));
		cells = MemoryContextAllocZero(cells_cxt, sizeof(ClaimsCell) * Max(SPI_processed, 1));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			MemoryContext old;

			cells[i].cell_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			old = MemoryContextSwitchTo(cells_cxt);
			cells[i].role_name = TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull));
			MemoryContextSwitchTo(old);
			cells[i].disabled = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		}
		ncells = (int) SPI_processed;
	}
	PG_CATCH();
	{
		cells_valid = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* Does the caller have the privileges of the named role? */
static bool
claims_caller_has_role(const char *role_name)
{
	Oid			role = get_role_oid(role_name, true);

	return OidIsValid(role) && has_privs_of_role(GetOuterUserId(), role);
}

/*
 * Is the caller an administrator: a superuser or a member of claims_admin?
 */
bool
claims_caller_is_admin(void)
{
	return superuser_arg(GetOuterUserId()) || claims_caller_has_role("claims_admin");
}

/* The caller's role name. */
static char *
claims_caller_name(void)
{
	return GetUserNameFromId(GetOuterUserId(), false);
}

/*
 * Refuse unless the caller may act for this cell.
 */
void
claims_authorize_cell(int64 cell_id)
{
	ClaimsCell *cell = NULL;

	if (claims_open_mode)
		return;

	claims_cells_ensure();
	for (int i = 0; i < ncells; i++)
		if (cells[i].cell_id == cell_id)
		{
			cell = &cells[i];
			break;
		}

	if (cell == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cell " INT64_FORMAT " is not registered", cell_id),
				 errhint("An administrator registers cells with claims_register_cell().")));
	/* administrators may still finish a disabled cell's leases */
	if (claims_caller_is_admin())
		return;
	if (cell->disabled)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("cell " INT64_FORMAT " is disabled", cell_id),
				 errhint("An administrator enables cells with claims_set_cell_disabled().")));
	if (!claims_caller_has_role(cell->role_name))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" may not act for cell " INT64_FORMAT,
						claims_caller_name(), cell_id),
				 errdetail("Cell " INT64_FORMAT " is bound to role \"%s\".",
						   cell_id, cell->role_name)));
}

/*
 * Refuse routing lookups from roles that are neither cells, routers nor
 * administrators.
 */
void
claims_authorize_lookup(void)
{
	if (claims_open_mode || claims_caller_is_admin() ||
		claims_caller_has_role("claims_router") || claims_caller_has_role("claims_cell"))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not look up claims", claims_caller_name()),
			 errhint("Grant claims_router to the routing role.")));
}

/*
 * claims_require_admin() returns void: raise 42501 unless the caller is an
 * administrator. Used by the administrator functions.
 */
Datum
claims_require_admin(PG_FUNCTION_ARGS)
{
	if (!claims_caller_is_admin())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" is not a claims administrator", claims_caller_name()),
				 errhint("Administrators are members of claims_admin.")));
	PG_RETURN_VOID();
}

/*
 * claims_caller() returns text: the role acting, as the audit log records
 * it (not the extension owner a SECURITY DEFINER function runs as).
 */
Datum
claims_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(claims_caller_name()));
}
