/*-------------------------------------------------------------------------
 *
 * list.c
 *	  claims_list_leases and claims_list_records: the two paged scans cells
 *	  use for reconciliation and verification.
 *
 * Both page by keyset, never by OFFSET, so a page costs the same on a table
 * of any size.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

PG_FUNCTION_INFO_V1(claims_list_leases);
PG_FUNCTION_INFO_V1(claims_list_records);

/*
 * A page of records is built in a context kept for the backend's life and
 * reset after each call: its first block, kept across resets, holds the
 * JsonbValue tree of a usual page, so a page costs no malloc of its own.
 */
#define CLAIMS_LISTING_BLOCK_SIZE (1024 * 1024)
#define CLAIMS_LISTING_MAX_BLOCK_SIZE (8 * 1024 * 1024)

static MemoryContext claims_listing_context = NULL;

#define CLAIMS_TOKEN_VERSION 1
#define CLAIMS_TOKEN_LEN 25		/* version, created_at, uuid */

/*
 * The opaque "next" token: (created_at, uuid) of the last lease returned,
 * wrapped as a google.protobuf.Any holding a BytesValue.
 */
static void
claims_json_lease_token(ClaimsJson *js, TimestampTz created_at, const pg_uuid_t *uuid)
{
	char		raw[CLAIMS_TOKEN_LEN];
	uint64		ts = (uint64) created_at;

	raw[0] = CLAIMS_TOKEN_VERSION;
	for (int i = 8; i >= 1; i--)
	{
		raw[i] = (char) (ts & 0xFF);
		ts >>= 8;
	}
	memcpy(raw + 9, uuid->data, UUID_LEN);

	claims_json_begin_object(js);
	claims_json_key(js, "@type");
	claims_json_cstring(js, "type.googleapis.com/google.protobuf.BytesValue");
	claims_json_key(js, "value");
	claims_json_bytes(js, raw, CLAIMS_TOKEN_LEN);
	claims_json_end_object(js);
}

/* One LeaseRecord {uuid, created_at, updated_at} from a lease row. */
static void
claims_json_lease(ClaimsJson *js, HeapTuple row, TupleDesc desc)
{
	bool		isnull;

	claims_json_begin_object(js);
	claims_json_key(js, "uuid");
	claims_json_uuid(js, DatumGetUUIDP(SPI_getbinval(row, desc, 1, &isnull)));
	claims_json_key(js, "created_at");
	claims_json_timestamp(js, DatumGetTimestampTz(SPI_getbinval(row, desc, 2, &isnull)));
	claims_json_key(js, "updated_at");
	claims_json_timestamp(js, DatumGetTimestampTz(SPI_getbinval(row, desc, 3, &isnull)));
	claims_json_end_object(js);
}

/*
 * claims_list_leases(request jsonb) returns jsonb:
 * {"leases": [{uuid, created_at, updated_at}], "next": token}, the cell's
 * outstanding leases in (created_at, uuid) order; "next" is absent on the
 * last page.
 */
Datum
claims_list_leases(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	ClaimsListLeasesRequest req;
	pg_uuid_t	nil_uuid;
	Datum		args[5];
	int			ret;
	uint64		n;
	uint64		shown;
	ClaimsJson	js;
	Jsonb	   *result;
	SPITupleTable *tt;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_parse_list_leases(PG_GETARG_JSONB_P(0), &req);

	memset(&nil_uuid, 0, sizeof(nil_uuid));
	args[0] = Int64GetDatum(req.cell_id);
	args[1] = TimestampTzGetDatum(req.created_after);
	args[2] = TimestampTzGetDatum(req.has_cursor ? req.cursor_created_at : DT_NOBEGIN);
	args[3] = UUIDPGetDatum(req.has_cursor ? &req.cursor_uuid : &nil_uuid);
	args[4] = Int32GetDatum(req.limit + 1);

	ret = claims_execute(CLAIMS_PLAN_LIST_LEASES, args, NULL, true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: list_leases statement returned %s", SPI_result_code_string(ret));
	tt = SPI_tuptable;
	n = SPI_processed;
	shown = Min(n, (uint64) req.limit);

	MemoryContextSwitchTo(caller);
	claims_json_init(&js);
	claims_json_begin_object(&js);
	if (claims_json_list_member(&js, "leases", shown))
	{
		for (uint64 i = 0; i < shown; i++)
			claims_json_lease(&js, tt->vals[i], tt->tupdesc);
		claims_json_end_array(&js);
	}
	if (n > shown)
	{
		bool		isnull;
		HeapTuple	last = tt->vals[shown - 1];

		claims_json_key(&js, "next");
		claims_json_lease_token(&js,
								DatumGetTimestampTz(SPI_getbinval(last, tt->tupdesc, 2, &isnull)),
								DatumGetUUIDP(SPI_getbinval(last, tt->tupdesc, 1, &isnull)));
	}
	claims_json_end_object(&js);
	result = claims_json_finish(&js);

	claims_spi_end(&call);
	PG_RETURN_JSONB_P(result);
}

/*
 * The listing context, empty; made on the first call (the backend's malloc
 * thresholds are set by claims_spi_begin, see common/malloc_thresholds.c).
 */
static MemoryContext
claims_listing_context_get(void)
{
	if (claims_listing_context == NULL)
	{
		claims_listing_context =
			AllocSetContextCreate(TopMemoryContext, "claims listing",
								  CLAIMS_LISTING_BLOCK_SIZE,
								  CLAIMS_LISTING_BLOCK_SIZE,
								  CLAIMS_LISTING_MAX_BLOCK_SIZE);
	}
	else
		MemoryContextReset(claims_listing_context);
	return claims_listing_context;
}

/* Source id (column 7 of a record row). */
static bytea *
claims_row_source_id(SPITupleTable *tt, uint64 i)
{
	bool		isnull;

	return DatumGetByteaPP(SPI_getbinval(tt->vals[i], tt->tupdesc, 7, &isnull));
}

/* Are two bytea values equal? */
static bool
claims_bytea_eq(bytea *a, bytea *b)
{
	return VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

/* Run the page statement from source id "gt" with a row limit. */
static SPITupleTable *
claims_records_page(ClaimsListRecordsRequest *req, Datum types, bytea *gt, int limit, uint64 *n)
{
	Datum		args[6];
	int			ret;

	args[0] = Int64GetDatum(req->cell_id);
	args[1] = Int32GetDatum(req->source_type);
	args[2] = PointerGetDatum(gt);
	args[3] = types;
	args[4] = Int32GetDatum(limit);
	args[5] = PointerGetDatum(req->source_id_lte);
	ret = claims_execute(req->source_id_lte ? CLAIMS_PLAN_LIST_RECORDS_LTE
									   : CLAIMS_PLAN_LIST_RECORDS, args, NULL, true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: list_records statement returned %s", SPI_result_code_string(ret));
	*n = SPI_processed;
	return SPI_tuptable;
}

/*
 * claims_list_records(request jsonb) returns jsonb:
 * {"records": [...], "truncated": bool}, the cell's claims of one source
 * type in (source id bytes, bucket type) order. A page never splits the
 * records of one source id, so resuming with source_id_gt = the last
 * returned source id continues exactly.
 */
Datum
claims_list_records(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	ClaimsListRecordsRequest req;
	Datum	   *type_datums;
	Datum		types;
	int			dims[1];
	int			lbs[1] = {1};
	SPITupleTable *tt;
	uint64		n;
	uint64		shown;
	bool		truncated = false;
	ClaimsJson	js;
	Jsonb	   *result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_parse_list_records(PG_GETARG_JSONB_P(0), &req);

	type_datums = palloc(sizeof(Datum) * Max(req.ntypes, 1));
	for (int i = 0; i < req.ntypes; i++)
		type_datums[i] = Int32GetDatum(req.types[i]);
	dims[0] = req.ntypes;
	types = PointerGetDatum(construct_md_array(type_datums, NULL, 1, dims, lbs,
											   INT4OID, 4, true, TYPALIGN_INT));

	tt = claims_records_page(&req, types, req.source_id_gt, req.limit + 1, &n);
	shown = n;
	if (n > (uint64) req.limit)
	{
		bytea	   *extra = claims_row_source_id(tt, req.limit);

		truncated = true;
		shown = req.limit;
		/* drop the trailing records of the source id the page would split */
		while (shown > 0 && claims_bytea_eq(claims_row_source_id(tt, shown - 1), extra))
			shown--;
		if (shown == 0)
		{
			/* one source id has more records than a page: return them all */
			Datum		args[4];
			uint64		more;
			int			ret;

			args[0] = Int64GetDatum(req.cell_id);
			args[1] = Int32GetDatum(req.source_type);
			args[2] = PointerGetDatum(extra);
			args[3] = types;
			ret = claims_execute(CLAIMS_PLAN_LIST_RECORDS_GROUP, args, NULL, true, 0);
			if (ret != SPI_OK_SELECT)
				elog(ERROR, "claims: list_records statement returned %s", SPI_result_code_string(ret));
			tt = SPI_tuptable;
			shown = SPI_processed;
			(void) claims_records_page(&req, types, extra, 1, &more);
			truncated = (more > 0);
		}
	}

	/*
	 * the tree in the listing context, the document in the caller's; nothing
	 * between here and the reset runs user code, so no nested listing can
	 * reset the context under this one (an error leaves it to the next call)
	 */
	MemoryContextSwitchTo(claims_listing_context_get());
	claims_json_init(&js);
	claims_json_begin_object(&js);
	if (claims_json_list_member(&js, "records", shown))
	{
		for (uint64 i = 0; i < shown; i++)
			(void) claims_json_record(&js, tt->vals[i], tt->tupdesc, claims_record_spi_attnums);
		claims_json_end_array(&js);
	}
	claims_json_bool_member(&js, "truncated", truncated);
	claims_json_end_object(&js);
	MemoryContextSwitchTo(caller);
	result = claims_json_finish(&js);
	MemoryContextReset(claims_listing_context);

	claims_spi_end(&call);
	PG_RETURN_JSONB_P(result);
}
