/*-------------------------------------------------------------------------
 *
 * cache.c
 *	  What the per-backend caches share: one invalidation dispatcher, the
 *	  snapshot they are loaded with and the life of their memory.
 *
 * The registries, the cell list, the lookup target and the saved plans are
 * kept per backend. PostgreSQL has few relcache callback slots per process,
 * so one callback here tells every cache; a syscache callback on schemas
 * tells the saved plans, whose text embeds the schema's name.
 *
 * A cache is loaded with a snapshot taken after the invalidation that made
 * it stale (never with the caller's older statement snapshot), and an API
 * call sees one version of it from start to end: a version replaced while
 * another call may still point into it lives on until the transaction ends.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/xact.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* Relcache callback: tell every cache that a relation (or all) changed. */
static void
claims_relcache_changed(Datum arg, Oid relid)
{
	claims_registry_invalidate(relid);
	claims_cells_invalidate(relid);
	claims_lookup_invalidate(relid);
}

/* Syscache callback on pg_namespace: a schema may have been renamed. */
static void
claims_namespace_changed(Datum arg, int cacheid, uint32 hashvalue)
{
	claims_plans_schema_changed();
}

/* Register the callbacks once per backend (from _PG_init). */
void
claims_cache_init(void)
{
	CacheRegisterRelcacheCallback(claims_relcache_changed, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, claims_namespace_changed, (Datum) 0);
}

/*
 * A fresh memory context for a new version of a cache. The old version (if
 * any) is deleted when no other API call is running in this backend; when
 * one is (a call made from inside another call's statements), it may still
 * read the old version, which is then handed to the transaction and lives
 * until the transaction ends. The name must be a constant string.
 */
MemoryContext
claims_cache_new_version(MemoryContext old, const char *name)
{
	MemoryContext cxt;

	cxt = AllocSetContextCreate(TopMemoryContext, "claims cache", ALLOCSET_SMALL_SIZES);
	MemoryContextSetIdentifier(cxt, name);
	if (old != NULL)
	{
		if (claims_call_depth > 1 && IsTransactionState())
			MemoryContextSetParent(old, TopTransactionContext);
		else
			MemoryContextDelete(old);
	}
	return cxt;
}

/*
 * Run a cache's saved statement under a snapshot taken now, after every
 * invalidation processed so far: what it reads is at least as new as the
 * change that made the cache stale. In parallel mode no new snapshot can be
 * taken; the statement then reads under the active snapshot and *fresh is
 * set false, so that the cache is loaded again by the next call outside
 * parallel mode.
 */
int
claims_execute_latest(ClaimsPlanId id, bool *fresh)
{
	if (IsInParallelMode())
	{
		*fresh = false;
		return claims_execute_snapshot(id, NULL, NULL, GetActiveSnapshot(), 0);
	}
	*fresh = true;
	return claims_execute_snapshot(id, NULL, NULL, GetLatestSnapshot(), 0);
}
