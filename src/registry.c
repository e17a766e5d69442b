/*-------------------------------------------------------------------------
 *
 * registry.c
 *	  Per-backend copy of the bucket, subject and source type registries.
 *
 * Operators add types with an INSERT. A statement trigger on each registry
 * table sends a relcache invalidation, which marks the copy stale; the next
 * API call loads a new version when it starts (claims_registry_pin), under
 * a snapshot taken after the invalidation. A call reads the version it
 * pinned from start to end and never loads in the middle: the lookups below
 * only read, so they are safe after the switch to the caller's context.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"

PG_FUNCTION_INFO_V1(claims_registry_changed);

static MemoryContext registry_cxt = NULL;
static bool registry_valid = false;
static bool registry_fresh = false;	/* loaded under a snapshot taken for it */
static Oid	registry_schema = InvalidOid;
static Oid	registry_relids[CLAIMS_REGISTRY_KINDS];
static ClaimsTypeEntry *registry_entries[CLAIMS_REGISTRY_KINDS];
static int	registry_count[CLAIMS_REGISTRY_KINDS];

static const char *const registry_tables[CLAIMS_REGISTRY_KINDS] = {
	"claim_bucket_types", "claim_subject_types", "claim_source_types"
};
static const char *const registry_labels[CLAIMS_REGISTRY_KINDS] = {
	"bucket type", "subject type", "source type"
};
static const ClaimsPlanId registry_plans[CLAIMS_REGISTRY_KINDS] = {
	CLAIMS_PLAN_REGISTRY_BUCKETS, CLAIMS_PLAN_REGISTRY_SUBJECTS, CLAIMS_PLAN_REGISTRY_SOURCES
};

/*
 * Mark the copy stale when a registry table (or everything) is invalidated.
 * Only a flag: a call may still be reading the current version.
 */
void
claims_registry_invalidate(Oid relid)
{
	if (!OidIsValid(relid))
	{
		registry_valid = false;
		return;
	}
	for (int k = 0; k < CLAIMS_REGISTRY_KINDS; k++)
		if (registry_relids[k] == relid)
			registry_valid = false;
}

/*
 * Statement trigger on the registry tables: tell every backend to reload.
 */
Datum
claims_registry_changed(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "claims_registry_changed: not called by trigger manager");
	CacheInvalidateRelcache(trigdata->tg_relation);
	return PointerGetDatum(NULL);
}

/*
 * Load one registry through its prepared statement into registry_cxt.
 */
static void
claims_registry_load_kind(ClaimsRegistryKind kind)
{
	int			ret;
	uint64		n;
	ClaimsTypeEntry *entries;
	Oid			nsp = claims_schema_oid();

	registry_relids[kind] = get_relname_relid(registry_tables[kind], nsp);

	ret = claims_execute_latest(registry_plans[kind], &registry_fresh);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: loading %s failed: %s", registry_tables[kind], SPI_result_code_string(ret));

	n = SPI_processed;
	entries = MemoryContextAllocZero(registry_cxt, sizeof(ClaimsTypeEntry) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;
		ClaimsTypeEntry *e = &entries[i];
		MemoryContext old;

		e->id = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		old = MemoryContextSwitchTo(registry_cxt);
		e->name = TextDatumGetCString(SPI_getbinval(tup, desc, 2, &isnull));
		d = SPI_getbinval(tup, desc, 3, &isnull);
		e->claim_field = isnull ? NULL : TextDatumGetCString(d);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		e->integer_valued = isnull ? false : DatumGetBool(d);
		d = SPI_getbinval(tup, desc, 6, &isnull);
		e->builtin = isnull ? false : DatumGetBool(d);
		d = SPI_getbinval(tup, desc, 5, &isnull);
		if (!isnull)
		{
			ArrayType  *arr = DatumGetArrayTypeP(d);
			Datum	   *elems;
			bool	   *nulls;
			int			nelems;

			deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
			e->aliases = palloc(sizeof(char *) * Max(nelems, 1));
			for (int j = 0; j < nelems; j++)
				if (!nulls[j])
					e->aliases[e->naliases++] = TextDatumGetCString(elems[j]);
		}
		MemoryContextSwitchTo(old);
	}
	registry_entries[kind] = entries;
	registry_count[kind] = (int) n;
}

/*
 * Make the copy current at the start of an API call (after SPI_connect):
 * load a new version when the registries changed since the last load (or
 * the last load, in parallel mode, could not take a snapshot of its own).
 */
void
claims_registry_pin(void)
{
	if (registry_valid && registry_schema == claims_schema_oid() &&
		(registry_fresh || IsInParallelMode()))
		return;

	registry_cxt = claims_cache_new_version(registry_cxt, "claims registry");
	for (int k = 0; k < CLAIMS_REGISTRY_KINDS; k++)
	{
		registry_entries[k] = NULL;
		registry_count[k] = 0;
	}

	/* An invalidation arriving while we load makes the next call reload. */
	registry_valid = true;
	registry_schema = claims_schema_oid();
	PG_TRY();
	{
		for (int k = 0; k < CLAIMS_REGISTRY_KINDS; k++)
			claims_registry_load_kind((ClaimsRegistryKind) k);
	}
	PG_CATCH();
	{
		registry_valid = false;
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* The version pinned by the current call; never loads. */
static void
claims_registry_check_pinned(void)
{
	if (registry_cxt == NULL)
		elog(ERROR, "claims: registry read outside an API call");
}

/*
 * The registered type with this number, or NULL.
 */
const ClaimsTypeEntry *
claims_type_by_id(ClaimsRegistryKind kind, int32 id)
{
	claims_registry_check_pinned();
	for (int i = 0; i < registry_count[kind]; i++)
		if (registry_entries[kind][i].id == id)
			return &registry_entries[kind][i];
	return NULL;
}

/*
 * The registered type with this name or older alias, or NULL. Names are
 * matched before aliases.
 */
const ClaimsTypeEntry *
claims_type_by_name(ClaimsRegistryKind kind, const char *name, int len)
{
	claims_registry_check_pinned();
	/* a current name always wins over another type's older alias */
	for (int i = 0; i < registry_count[kind]; i++)
	{
		ClaimsTypeEntry *e = &registry_entries[kind][i];

		if ((int) strlen(e->name) == len && memcmp(e->name, name, len) == 0)
			return e;
	}
	for (int i = 0; i < registry_count[kind]; i++)
	{
		ClaimsTypeEntry *e = &registry_entries[kind][i];

		for (int j = 0; j < e->naliases; j++)
			if ((int) strlen(e->aliases[j]) == len && memcmp(e->aliases[j], name, len) == 0)
				return e;
	}
	return NULL;
}

/*
 * The bucket type whose types.v1.Claim field has this name (snake_case or
 * lowerCamelCase), or NULL.
 */
const ClaimsTypeEntry *
claims_bucket_type_by_field(const char *field, int len)
{
	claims_registry_check_pinned();
	for (int i = 0; i < registry_count[CLAIMS_BUCKET_TYPES]; i++)
	{
		ClaimsTypeEntry *e = &registry_entries[CLAIMS_BUCKET_TYPES][i];

		if (e->claim_field && claims_key_matches(field, len, e->claim_field))
			return e;
	}
	return NULL;
}

/*
 * The bucket type whose types.v1.ClaimType name ends in this tail: its
 * claim field in upper case ("USER_ID" of CLAIM_TYPE_USER_ID), or NULL.
 */
const ClaimsTypeEntry *
claims_bucket_type_by_claim_type(const char *tail, int len)
{
	claims_registry_check_pinned();
	for (int i = 0; i < registry_count[CLAIMS_BUCKET_TYPES]; i++)
	{
		ClaimsTypeEntry *e = &registry_entries[CLAIMS_BUCKET_TYPES][i];
		int			j;

		if (e->claim_field == NULL || (int) strlen(e->claim_field) != len)
			continue;
		for (j = 0; j < len; j++)
			if (pg_ascii_toupper((unsigned char) e->claim_field[j]) != tail[j])
				break;
		if (j == len)
			return e;
	}
	return NULL;
}

/* Human name of a registry, for messages. */
const char *
claims_registry_kind_label(ClaimsRegistryKind kind)
{
	return registry_labels[kind];
}

/* Table holding a registry, for hints. */
const char *
claims_registry_table(ClaimsRegistryKind kind)
{
	return registry_tables[kind];
}
