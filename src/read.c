/*-------------------------------------------------------------------------
 *
 * read.c
 *	  claims_get_record: the routing lookup of one value.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_get_record);

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
	Datum		args[3];
	bytea	   *digest;
	int			ret;
	ClaimsJson	js;
	Jsonb	   *result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));

	claims_spi_begin(fcinfo, &call);
	claims_authorize_lookup();
	claims_parse_get_record(PG_GETARG_JSONB_P(0), &ref);

	digest = palloc(VARHDRSZ + CLAIMS_DIGEST_LEN);
	SET_VARSIZE(digest, VARHDRSZ + CLAIMS_DIGEST_LEN);
	memcpy(VARDATA(digest), ref.digest, CLAIMS_DIGEST_LEN);
	args[0] = Int32GetDatum(ref.bucket_type);
	args[1] = PointerGetDatum(digest);
	args[2] = PointerGetDatum(cstring_to_text_with_len(ref.value, ref.value_len));

	ret = SPI_execute_plan(claims_plan(CLAIMS_PLAN_GET_RECORD), args, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: get_record statement returned %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
	{
		claims_spi_end(&call);
		PG_RETURN_NULL();
	}

	MemoryContextSwitchTo(caller);
	claims_json_init(&js);
	claims_json_begin_object(&js);
	claims_json_key(&js, "record");
	claims_json_record(&js, SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
	claims_json_end_object(&js);
	result = claims_json_finish(&js);

	claims_spi_end(&call);
	PG_RETURN_JSONB_P(result);
}
