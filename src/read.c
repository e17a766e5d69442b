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
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "access/htup_details.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opfamily.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
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
	AttrNumber	attnums[CLAIMS_RECORD_NCOLS];
	AttrNumber	digest_attnum;	/* bucket_digest, the key's second column */
} ClaimsLookupTarget;

static ClaimsLookupTarget target;

/* Forget the target when its table (or everything) may have changed. */
void
claims_lookup_invalidate(Oid relid)
{
	if (relid == InvalidOid || relid == target.relid)
		target.valid = false;
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
 * Lock the claims table of the extension's schema. Locking processes
 * invalidations, so the name is looked up again after the lock: when it
 * now names another table (dropped and created again meanwhile), that one
 * is locked instead, as RangeVarGetRelidExtended does.
 */
static Relation
claims_lookup_open_table(Oid nsp)
{
	Oid			relid = InvalidOid;
	Relation	rel = NULL;

	for (;;)
	{
		Oid			now = get_relname_relid("claims", nsp);

		if (rel != NULL)
		{
			if (now == relid)
				break;
			table_close(rel, AccessShareLock);
			rel = NULL;
		}
		if (!OidIsValid(now))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("table claims of the claims extension is missing")));
		relid = now;
		rel = try_relation_open(relid, AccessShareLock);
	}
	if (!target.valid || target.nsp != nsp || target.relid != relid)
	{
		target.nsp = nsp;
		target.relid = relid;
		claims_record_attnums(RelationGetDescr(rel), target.attnums);
		target.digest_attnum = get_attnum(relid, "bucket_digest");
		target.valid = true;
	}
	return rel;
}

/*
 * Is this the key index the probe expects: a valid, ready, live unique
 * btree index of the table on (bucket_type int4, bucket_digest bytea), no
 * expressions, no predicate? Anything else named claims_bucket_key (an
 * operator's own index, an index in the middle of a REINDEX) is not read.
 */
static bool
claims_lookup_index_fits(Relation index, Relation rel)
{
	Form_pg_index ix = index->rd_index;

	return index->rd_rel->relkind == RELKIND_INDEX &&
		index->rd_rel->relam == BTREE_AM_OID &&
		ix->indrelid == RelationGetRelid(rel) &&
		ix->indisunique && ix->indisvalid && ix->indisready && ix->indislive &&
		ix->indnkeyatts == 2 &&
		ix->indkey.values[0] == target.attnums[1] &&
		ix->indkey.values[1] == target.digest_attnum &&
		heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL) &&
		heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) &&
		index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
		index->rd_opfamily[1] == BYTEA_BTREE_FAM_OID;
}

/*
 * Lock the table's key index, looked up by name after the table's lock
 * (REINDEX CONCURRENTLY gives the name to a new index; an index rename
 * does not invalidate the table) and checked to be the key index. NULL
 * when no such index can be had now: the caller then reads through the
 * planner.
 */
static Relation
claims_lookup_open_index(Relation rel, Oid nsp)
{
	Oid			indexid = get_relname_relid("claims_bucket_key", nsp);
	Relation	index;

	if (!OidIsValid(indexid))
		return NULL;
	index = try_relation_open(indexid, AccessShareLock);
	if (index == NULL)
		return NULL;
	if (claims_lookup_index_fits(index, rel))
		return index;
	relation_close(index, AccessShareLock);
	return NULL;
}

/*
 * Find the claim of one value through the key index; false when the value
 * is not claimed.
 */
static bool
claims_lookup_by_index(ClaimsBucketRef *ref, Relation rel, Relation index, ClaimsJson *js,
					   int64 *cell_id)
{
	ScanKeyData keys[2];
	IndexScanDesc scan;
	TupleTableSlot *slot;
	bytea	   *digest;
	bool		found = false;

	digest = palloc(VARHDRSZ + CLAIMS_DIGEST_LEN);
	SET_VARSIZE(digest, VARHDRSZ + CLAIMS_DIGEST_LEN);
	memcpy(VARDATA(digest), ref->digest, CLAIMS_DIGEST_LEN);

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
		*cell_id = claims_json_record(js, heap_copytuple(tuple), desc, target.attnums);
		found = true;
		break;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	return found;
}

/*
 * Find the claim of one value with a planned statement (no valid key
 * index to read directly); false when the value is not claimed.
 */
static bool
claims_lookup_by_statement(ClaimsBucketRef *ref, ClaimsJson *js, int64 *cell_id)
{
	Datum		args[3];
	bytea	   *digest;
	int			ret;

	digest = palloc(VARHDRSZ + CLAIMS_DIGEST_LEN);
	SET_VARSIZE(digest, VARHDRSZ + CLAIMS_DIGEST_LEN);
	memcpy(VARDATA(digest), ref->digest, CLAIMS_DIGEST_LEN);
	args[0] = Int32GetDatum(ref->bucket_type);
	args[1] = PointerGetDatum(digest);
	args[2] = PointerGetDatum(cstring_to_text_with_len(ref->value, ref->value_len));
	ret = claims_execute(CLAIMS_PLAN_GET_RECORD, args, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: get_record statement returned %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		return false;
	claims_json_key(js, "record");
	*cell_id = claims_json_record(js, SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								  claims_record_spi_attnums);
	return true;
}

/*
 * Find the claim of one value and add its Record to the document; false
 * when the value is not claimed. *cell_id is set to the owning cell's.
 */
static bool
claims_lookup_record(ClaimsBucketRef *ref, ClaimsJson *js, int64 *cell_id)
{
	Oid			nsp = claims_schema_oid();
	Relation	rel = claims_lookup_open_table(nsp);
	Relation	index = claims_lookup_open_index(rel, nsp);
	bool		found;

	if (index == NULL)
	{
		table_close(rel, NoLock);
		return claims_lookup_by_statement(ref, js, cell_id);
	}
	found = claims_lookup_by_index(ref, rel, index, js, cell_id);
	index_close(index, NoLock);
	table_close(rel, NoLock);
	return found;
}

/*
 * claims_get_record(request jsonb) returns jsonb: {"record": Record,
 * "cell_info": CellInfo} (GetRecordResponse), or NULL when the value is
 * not claimed. Values under a creating lease are routable at once.
 */
Datum
claims_get_record(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	ClaimsBucketRef ref;
	ClaimsJson	js;
	Jsonb	   *result = NULL;
	int64		cell_id;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_authorize_lookup();
	claims_parse_get_record(PG_GETARG_JSONB_P(0), &ref);

	claims_json_init(&js);
	claims_json_begin_object(&js);
	if (claims_lookup_record(&ref, &js, &cell_id))
	{
		MemoryContext spi;

		claims_json_key(&js, "cell_info");
		claims_json_cell_info(&js, cell_id);
		spi = MemoryContextSwitchTo(caller);

		claims_json_end_object(&js);
		result = claims_json_finish(&js);
		MemoryContextSwitchTo(spi);
	}

	claims_spi_end(&call);
	if (result == NULL)
		PG_RETURN_NULL();
	PG_RETURN_JSONB_P(result);
}
