/*-------------------------------------------------------------------------
 *
 * read.c
 *	  claims_get_record: the routing lookup of one value.
 *
 * The lookup is the hottest call of the store (every request a router
 * cannot place from its cache), so it reads the unique index directly
 * instead of going through SPI and the executor: one index probe on
 * (bucket_type, sha256 of the value) under the caller's snapshot.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/genam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

PG_FUNCTION_INFO_V1(claims_get_record);

/* Names of the RECORD_COLUMNS (spi_plans.c), in order. */
static const char *const record_columns[CLAIMS_RECORD_NCOLS] = {
	"uuid", "bucket_type", "bucket_value", "subject_type", "subject_id", "source_type",
	"source_id", "user_data", "creator_id", "lease_uuid", "status", "created_at", "updated_at"
};

/*
 * Where the lookup reads: the claims table and its key index in the
 * extension's schema, and the record columns' positions in the table.
 * Kept per backend; any invalidation of the table forgets them.
 */
typedef struct ClaimsLookupTarget
{
	bool		valid;
	Oid			nsp;
	Oid			relid;
	Oid			indexid;
	AttrNumber	attnums[CLAIMS_RECORD_NCOLS];
} ClaimsLookupTarget;

static ClaimsLookupTarget target;

/* Relcache callback: forget the target when its table may have changed. */
static void
claims_lookup_invalidate(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == target.relid)
		target.valid = false;
}

/* Register the invalidation callback (from _PG_init). */
void
claims_read_init(void)
{
	CacheRegisterRelcacheCallback(claims_lookup_invalidate, (Datum) 0);
}

/*
 * Where the record columns are in the claims table.
 */
static void
claims_record_attnums(TupleDesc desc, AttrNumber *attnums)
{
	for (int c = 0; c < CLAIMS_RECORD_NCOLS; c++)
	{
		attnums[c] = InvalidAttrNumber;
		for (int a = 0; a < desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a);

			if (!att->attisdropped && strcmp(NameStr(att->attname), record_columns[c]) == 0)
			{
				attnums[c] = att->attnum;
				break;
			}
		}
		if (attnums[c] == InvalidAttrNumber)
			elog(ERROR, "claims: column \"%s\" of table claims is missing", record_columns[c]);
	}
}

/*
 * Open the claims table and its key index, finding them first if need be.
 */
static void
claims_lookup_open(Relation *rel, Relation *index)
{
	Oid			nsp = claims_schema_oid();

	if (!target.valid || target.nsp != nsp)
	{
		target.valid = false;
		target.nsp = nsp;
		target.relid = get_relname_relid("claims", nsp);
		target.indexid = get_relname_relid("claims_bucket_key", nsp);
		if (!OidIsValid(target.relid) || !OidIsValid(target.indexid))
			elog(ERROR, "claims: table claims or its index claims_bucket_key is missing");
	}
	/* locking may process invalidations, which can clear the target */
	*rel = table_open(target.relid, AccessShareLock);
	*index = index_open(target.indexid, AccessShareLock);
	if (!target.valid)
	{
		claims_record_attnums(RelationGetDescr(*rel), target.attnums);
		target.valid = true;
	}
}

/*
 * Find the claim of one value and add its Record to the document; false
 * when the value is not claimed.
 */
static bool
claims_lookup_record(ClaimsBucketRef *ref, ClaimsJson *js)
{
	Relation	rel;
	Relation	index;
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bytea	   *digest;
	bool		found = false;

	digest = palloc(VARHDRSZ + CLAIMS_DIGEST_LEN);
	SET_VARSIZE(digest, VARHDRSZ + CLAIMS_DIGEST_LEN);
	memcpy(VARDATA(digest), ref->digest, CLAIMS_DIGEST_LEN);

	claims_lookup_open(&rel, &index);
	ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(ref->bucket_type));
	ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_BYTEAEQ, PointerGetDatum(digest));

	slot = table_slot_create(rel, NULL);
	scan = index_beginscan(rel, index, GetActiveSnapshot(), 2, 0);
	index_rescan(scan, keys, 2, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		bool		should_free;
		HeapTuple	tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		text	   *value;

		value = DatumGetTextPP(heap_getattr(tuple, target.attnums[2], desc, &isnull));
		/* the key is a digest: compare the value itself too */
		if (VARSIZE_ANY_EXHDR(value) != ref->value_len ||
			memcmp(VARDATA_ANY(value), ref->value, ref->value_len) != 0)
			continue;

		claims_json_key(js, "record");
		claims_json_record(js, heap_copytuple(tuple), desc, target.attnums);
		found = true;
		break;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return found;
}

/*
 * claims_get_record(request jsonb) returns jsonb: {"record": Record}, or
 * NULL when the value is not claimed. Values under a creating lease are
 * routable at once.
 */
Datum
claims_get_record(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	ClaimsBucketRef ref;
	ClaimsJson	js;
	Jsonb	   *result = NULL;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_authorize_lookup();
	claims_parse_get_record(PG_GETARG_JSONB_P(0), &ref);

	claims_json_init(&js);
	claims_json_begin_object(&js);
	if (claims_lookup_record(&ref, &js))
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		claims_json_end_object(&js);
		result = claims_json_finish(&js);
		MemoryContextSwitchTo(spi);
	}

	claims_spi_end(&call);
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}
