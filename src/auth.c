/*-------------------------------------------------------------------------
 *
 * auth.c
 *	  Cell identity: which database role may act for which cell.
 *
 * Each cell is registered in claim_cells with the role it connects as.
 * A call for cell N is accepted only from a role that has the privileges
 * of cell N's role, or from an administrator (a member of claims_admin, or
 * a superuser). The role judged is the one that called the function
 * (claims_caller_role: after SET ROLE, or the owner of a SECURITY DEFINER
 * function that called it), never the extension owner the statements then
 * run as. Unregistered cells are
 * refused, and disabled cells to all but administrators, unless
 * claims.open_mode is on. Calls from inside a security-restricted operation
 * (a table owner's code run by maintenance commands) are always refused.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(claims_require_admin);
PG_FUNCTION_INFO_V1(claims_caller);
PG_FUNCTION_INFO_V1(claims_lock_cell);

/* field4 of the lock tag: keeps these locks apart from advisory locks */
#define CLAIMS_CELL_LOCK_SPACE 0x434C

bool		claims_open_mode = false;

static MemoryContext cells_cxt = NULL;
static bool cells_valid = false;
static bool cells_fresh = false;	/* loaded under a snapshot taken for it */
static Oid	cells_schema = InvalidOid;
static Oid	cells_relid = InvalidOid;
static ClaimsCell *cells = NULL;
static int	ncells = 0;

/*
 * Mark the cached cell list stale when claim_cells (or everything) changes.
 */
void
claims_cells_invalidate(Oid relid)
{
	if (!OidIsValid(relid) || relid == cells_relid)
		cells_valid = false;
}

/* A text column of the cell row, copied into the cache; NULL when null. */
static char *
claims_cells_text(HeapTuple tup, TupleDesc desc, int col)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	return isnull ? NULL : MemoryContextStrdup(cells_cxt, TextDatumGetCString(d));
}

/* A bigint[] column of the cell row, copied into the cache. */
static int64 *
claims_cells_int8s(HeapTuple tup, TupleDesc desc, int col, int *n)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);
	Datum	   *elems;
	int64	   *out;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, NULL, n);
	out = MemoryContextAlloc(cells_cxt, sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		out[i] = DatumGetInt64(elems[i]);
	return out;
}

/*
 * Load claim_cells into the per-backend cache when it is stale; needs an
 * SPI connection. Read under a snapshot taken now, so a change whose
 * invalidation has been processed (a cell disabled while this call waited
 * on its lock) is seen, whatever snapshot the caller's statement holds.
 * Before ALTER EXTENSION ... UPDATE to 1.2 the table has no CellInfo
 * columns yet: the cells then have none of that information.
 */
static void
claims_cells_ensure(void)
{
	int			ret;
	bool		with_info;

	if (cells_valid && cells_schema == claims_schema_oid() &&
		(cells_fresh || IsInParallelMode()))
		return;

	cells_cxt = claims_cache_new_version(cells_cxt, "claims cells");
	cells = NULL;
	ncells = 0;

	/* an invalidation arriving while we load makes the next call reload */
	cells_valid = true;
	cells_schema = claims_schema_oid();
	cells_relid = get_relname_relid("claim_cells", cells_schema);
	with_info = OidIsValid(cells_relid) &&
		get_attnum(cells_relid, "sequence_ranges") != InvalidAttrNumber;
	PG_TRY();
	{
		ret = claims_execute_latest(with_info ? CLAIMS_PLAN_CELLS_INFO : CLAIMS_PLAN_CELLS,
									&cells_fresh);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "claims: loading claim_cells failed: %s", SPI_result_code_string(ret));
		cells = MemoryContextAllocZero(cells_cxt, sizeof(ClaimsCell) * Max(SPI_processed, 1));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			ClaimsCell *c = &cells[i];

			c->cell_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
			c->role_name = claims_cells_text(tup, desc, 2);
			c->disabled = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
			if (with_info)
			{
				int			nmax;

				c->address = claims_cells_text(tup, desc, 4);
				c->session_prefix = claims_cells_text(tup, desc, 5);
				c->minvals = claims_cells_int8s(tup, desc, 6, &c->nranges);
				c->maxvals = claims_cells_int8s(tup, desc, 7, &nmax);
				c->nranges = Min(c->nranges, nmax);
			}
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

/*
 * Every registered cell in cell id order, as this call sees the registry
 * (needs an SPI connection).
 */
const ClaimsCell *
claims_cells_all(int *n)
{
	claims_cells_ensure();
	*n = ncells;
	return cells;
}

/* The registered cell with this id, or NULL (needs an SPI connection). */
const ClaimsCell *
claims_cell_by_id(int64 cell_id)
{
	claims_cells_ensure();
	for (int i = 0; i < ncells; i++)
		if (cells[i].cell_id == cell_id)
			return &cells[i];
	return NULL;
}

/* Does this role have the privileges of the named role? */
static bool
claims_role_has_role(Oid member, const char *role_name)
{
	Oid			role = get_role_oid(role_name, true);

	return OidIsValid(role) && has_privs_of_role(member, role);
}

/* Is this role an administrator: a superuser or a member of claims_admin? */
static bool
claims_role_is_admin(Oid role)
{
	return superuser_arg(role) || claims_role_has_role(role, "claims_admin");
}

/*
 * Is the caller of the current API call an administrator?
 */
bool
claims_caller_is_admin(void)
{
	return claims_role_is_admin(claims_caller_role);
}

/* The caller's role name. */
static char *
claims_caller_name(void)
{
	return GetUserNameFromId(claims_caller_role, false);
}

/*
 * Serialise new leases of a cell against its decommissioning: a
 * begin_update holds this lock in share mode until its transaction ends,
 * and claims_lock_cell() takes it exclusively. A lock tag of its own, so it
 * never meets an application's advisory locks.
 */
static void
claims_lock_cell_tag(int64 cell_id, LOCKMODE mode)
{
	LOCKTAG		tag;

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, (uint32) ((uint64) cell_id >> 32),
						 (uint32) cell_id, CLAIMS_CELL_LOCK_SPACE);
	(void) LockAcquire(&tag, mode, false, false);
}

/*
 * Refuse every call made inside a security-restricted operation: index
 * expressions, ANALYZE, VACUUM, CLUSTER, REINDEX, REFRESH MATERIALIZED VIEW
 * and autovacuum run a table owner's code on behalf of whoever started the
 * command (often a superuser); such code has no business acting for a cell.
 */
static void
claims_refuse_restricted(void)
{
	if (InSecurityRestrictedOperation())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("claims functions cannot run inside a security-restricted operation"),
				 errdetail("Index expressions, ANALYZE, VACUUM, CLUSTER, REINDEX and materialized views run as a table's owner; the claims functions judge the session's role.")));
}

/*
 * Refuse unless the caller may act for this cell.
 */
void
claims_authorize_cell(int64 cell_id, bool for_new_lease)
{
	const ClaimsCell *cell;

	claims_refuse_restricted();
	if (for_new_lease)
	{
		/* wait out a decommission in progress, then see its outcome */
		claims_lock_cell_tag(cell_id, ShareLock);
		AcceptInvalidationMessages();
	}
	if (claims_open_mode)
		return;

	cell = claims_cell_by_id(cell_id);
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
	if (!claims_role_has_role(claims_caller_role, cell->role_name))
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
	claims_refuse_restricted();
	if (claims_open_mode || claims_caller_is_admin() ||
		claims_role_has_role(claims_caller_role, "claims_router") ||
		claims_role_has_role(claims_caller_role, "claims_cell"))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not look up claims", claims_caller_name()),
			 errhint("Grant claims_router to the routing role.")));
}

/*
 * Refuse the cell list (GetCells) to roles that are neither an enabled
 * cell's role nor administrators: routers and other roles see cells only
 * through the records they look up.
 */
void
claims_authorize_get_cells(void)
{
	int			n;
	const ClaimsCell *all;

	claims_refuse_restricted();
	if (claims_open_mode || claims_caller_is_admin())
		return;
	all = claims_cells_all(&n);
	for (int i = 0; i < n; i++)
		if (!all[i].disabled && claims_role_has_role(claims_caller_role, all[i].role_name))
			return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("role \"%s\" may not list the cells", claims_caller_name()),
			 errdetail("The cell list is for the roles of registered, enabled cells and for administrators.")));
}

/*
 * claims_require_admin() returns void: raise 42501 unless the session's
 * role is an administrator. The administrator functions are SECURITY
 * DEFINER, so they judge the role outside them (GetOuterUserId); only
 * claims_admin may execute them at all.
 */
Datum
claims_require_admin(PG_FUNCTION_ARGS)
{
	claims_refuse_restricted();
	if (!claims_role_is_admin(GetOuterUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" is not a claims administrator",
						GetUserNameFromId(GetOuterUserId(), false)),
				 errhint("Administrators are members of claims_admin.")));
	PG_RETURN_VOID();
}

/*
 * claims_caller() returns text: the role acting, as the audit log records
 * it (not the extension owner the administrator functions run as).
 */
Datum
claims_caller(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(GetUserNameFromId(GetOuterUserId(), false)));
}

/*
 * claims_lock_cell(cell_id bigint) returns void: wait for the cell's
 * begin_updates in progress and hold off new ones until this transaction
 * ends (used by decommissioning).
 */
Datum
claims_lock_cell(PG_FUNCTION_ARGS)
{
	claims_refuse_restricted();
	if (!claims_role_is_admin(GetOuterUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\" is not a claims administrator",
						GetUserNameFromId(GetOuterUserId(), false))));
	claims_lock_cell_tag(PG_GETARG_INT64(0), ExclusiveLock);
	PG_RETURN_VOID();
}
