/*-------------------------------------------------------------------------
 *
 * begin_update.c
 *	  claims_begin_update: take a lease on every value of a batch.
 *
 * One statement inserts the lease and touches every claim row in one global
 * order (bucket type, then SHA-256 of the value), so overlapping batches
 * wait for each other instead of deadlocking. Creates insert LEASE_CREATING
 * rows; destroys (and replaces, the same value in both lists) mark the
 * cell's own unleased rows LEASE_DESTROYING through ON CONFLICT DO UPDATE.
 * When any row could not be taken, a second look classifies why and the
 * whole call fails, leaving nothing behind.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(claims_begin_update);

/* One row the batch touches. */
typedef struct ClaimsBatchOp
{
	ClaimsOp	op;
	ClaimsMetadata *m;			/* new metadata for creates and replaces */
	pg_uuid_t	uuid;			/* uuid a newly inserted row gets */
} ClaimsBatchOp;

/*
 * Why a row could not be taken: the contract's kinds (refusal.h), most
 * fundamental first. The human words of the DETAIL are the store's own.
 */
#define CLAIMS_OK CLAIMS_REFUSAL_NONE
#define CLAIMS_NOT_FOUND CLAIMS_REFUSAL_NOT_CLAIMED
#define CLAIMS_NOT_OWNER CLAIMS_REFUSAL_OTHER_CELL
#define CLAIMS_PERMANENT CLAIMS_REFUSAL_TAKEN
#define CLAIMS_TEMPORARY CLAIMS_REFUSAL_LEASED

static const char *const failure_words[CLAIMS_REFUSAL_NKINDS] = {
	[CLAIMS_NOT_FOUND] = "not claimed",
	[CLAIMS_NOT_OWNER] = "owned by another cell",
	[CLAIMS_PERMANENT] = "permanent",
	[CLAIMS_TEMPORARY] = "temporary",
};

typedef struct ClaimsFailed
{
	ClaimsRefusalKind kind;
	ClaimsMetadata *m;
} ClaimsFailed;

/* Order batch entries by the global row order. */
static int
claims_op_cmp(const void *a, const void *b)
{
	const ClaimsMetadata *x = *(const ClaimsMetadata *const *) a;
	const ClaimsMetadata *y = *(const ClaimsMetadata *const *) b;
	int			c;

	if (x->bucket_type != y->bucket_type)
		return x->bucket_type < y->bucket_type ? -1 : 1;
	c = memcmp(x->digest, y->digest, CLAIMS_DIGEST_LEN);
	if (c != 0)
		return c;
	/* the create comes first, so a replace carries the new metadata */
	return (int) y->in_create_list - (int) x->in_create_list;
}

/*
 * Count a successful batch's values per bucket type: the operations are in
 * bucket type order, so each type's run is added at once.
 */
static void
claims_count_types(const ClaimsBatchOp *ops, int nops)
{
	int64		n[3] = {0, 0, 0};

	for (int i = 0; i < nops; i++)
	{
		n[ops[i].op == CLAIMS_OP_CREATE ? 0 : ops[i].op == CLAIMS_OP_DESTROY ? 1 : 2]++;
		if (i + 1 < nops && ops[i + 1].m->bucket_type == ops[i].m->bucket_type)
			continue;
		claims_stats_count_type(ops[i].m->bucket_type, CLAIMS_TYPE_STAT_CREATED, n[0]);
		claims_stats_count_type(ops[i].m->bucket_type, CLAIMS_TYPE_STAT_DESTROYED, n[1]);
		claims_stats_count_type(ops[i].m->bucket_type, CLAIMS_TYPE_STAT_REPLACED, n[2]);
		n[0] = n[1] = n[2] = 0;
	}
}

/* Order failures as the request listed them: creates, then destroys. */
static int
claims_failed_cmp(const void *a, const void *b)
{
	const ClaimsFailed *x = a;
	const ClaimsFailed *y = b;

	if (x->m->in_create_list != y->m->in_create_list)
		return x->m->in_create_list ? -1 : 1;
	return x->m->list_index - y->m->list_index;
}

/*
 * Merge the two lists into one sorted list of row operations; a value in
 * both lists becomes one replace.
 */
static ClaimsBatchOp *
claims_build_ops(ClaimsBeginRequest *req, int *nops)
{
	int			n = req->ncreates + req->ndestroys;
	ClaimsMetadata **all = palloc(sizeof(ClaimsMetadata *) * n);
	ClaimsBatchOp *ops = palloc0(sizeof(ClaimsBatchOp) * n);
	int			k = 0;

	for (int i = 0; i < req->ncreates; i++)
		all[k++] = &req->creates[i];
	for (int i = 0; i < req->ndestroys; i++)
		all[k++] = &req->destroys[i];
	qsort(all, n, sizeof(ClaimsMetadata *), claims_op_cmp);

	k = 0;
	for (int i = 0; i < n; i++)
	{
		ClaimsMetadata *m = all[i];

		if (i + 1 < n && all[i + 1]->bucket_type == m->bucket_type &&
			memcmp(all[i + 1]->digest, m->digest, CLAIMS_DIGEST_LEN) == 0)
		{
			ops[k].op = CLAIMS_OP_REPLACE;
			ops[k].m = m;		/* the create's metadata */
			i++;
		}
		else
		{
			ops[k].op = m->in_create_list ? CLAIMS_OP_CREATE : CLAIMS_OP_DESTROY;
			ops[k].m = m;
		}
		k++;
	}
	*nops = k;
	return ops;
}

/* A one-dimensional array from datums and null flags. */
static Datum
claims_array(Datum *elems, bool *nulls, int n, Oid elemtype)
{
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			dims[1] = {n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(elemtype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs,
											  elemtype, typlen, typbyval, typalign));
}

/* A bytea holding a digest. */
static Datum
claims_digest_datum(const uint8 *digest)
{
	bytea	   *b = palloc(VARHDRSZ + CLAIMS_DIGEST_LEN);

	SET_VARSIZE(b, VARHDRSZ + CLAIMS_DIGEST_LEN);
	memcpy(VARDATA(b), digest, CLAIMS_DIGEST_LEN);
	return PointerGetDatum(b);
}

/*
 * After a failed batch: look at each row again and raise the most
 * fundamental error, listing every value at fault.
 */
static void
claims_report_failures(ClaimsBeginRequest *req, ClaimsBatchOp *ops, int nops,
					   const pg_uuid_t *lease_uuid)
{
	Datum	   *types = palloc(sizeof(Datum) * nops);
	Datum	   *digests = palloc(sizeof(Datum) * nops);
	Datum		args[2];
	ClaimsFailed *failed = palloc(sizeof(ClaimsFailed) * nops);
	int			nfailed = 0;
	ClaimsRefusalKind worst = CLAIMS_TEMPORARY;
	StringInfoData line;
	StringInfoData detail;
	char	   *first = NULL;
	int			ret;

	for (int i = 0; i < nops; i++)
	{
		types[i] = Int32GetDatum(ops[i].m->bucket_type);
		digests[i] = claims_digest_datum(ops[i].m->digest);
	}
	args[0] = claims_array(types, NULL, nops, INT4OID);
	args[1] = claims_array(digests, NULL, nops, BYTEAOID);
	ret = claims_execute(CLAIMS_PLAN_CLASSIFY, args, NULL, false, 0);
	if (ret != SPI_OK_SELECT || SPI_processed != (uint64) nops)
		elog(ERROR, "claims: classifying a failed batch returned %s", SPI_result_code_string(ret));

	for (int i = 0; i < nops; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		no_row,
					no_owner,
					no_lease;
		Datum		row_uuid = SPI_getbinval(tup, desc, 1, &no_row);
		int64		owner = DatumGetInt64(SPI_getbinval(tup, desc, 2, &no_owner));
		Datum		row_lease = SPI_getbinval(tup, desc, 3, &no_lease);
		bool		ours = !no_lease &&
			memcmp(DatumGetUUIDP(row_lease)->data, lease_uuid->data, UUID_LEN) == 0;
		ClaimsRefusalKind kind = CLAIMS_OK;

		if (ops[i].op == CLAIMS_OP_CREATE)
		{
			if (ours)
				kind = CLAIMS_OK;
			else if (no_row)
				kind = CLAIMS_TEMPORARY;	/* released while we looked */
			else if (no_lease)
				kind = CLAIMS_PERMANENT;
			else
				kind = CLAIMS_TEMPORARY;
		}
		else
		{
			if (no_row)
				kind = CLAIMS_NOT_FOUND;
			else if (ours)
				kind = memcmp(DatumGetUUIDP(row_uuid)->data, ops[i].uuid.data, UUID_LEN) == 0
					? CLAIMS_NOT_FOUND : CLAIMS_OK;
			else if (owner != req->cell_id)
				kind = CLAIMS_NOT_OWNER;
			else
				kind = CLAIMS_TEMPORARY;
		}
		if (kind != CLAIMS_OK)
		{
			failed[nfailed].kind = kind;
			failed[nfailed].m = ops[i].m;
			nfailed++;
			if (kind < worst)
				worst = kind;
		}
	}

	if (nfailed == 0)
		elog(ERROR, "claims: batch failed but no row is at fault");

	qsort(failed, nfailed, sizeof(ClaimsFailed), claims_failed_cmp);
	initStringInfo(&detail);
	appendStringInfoString(&detail, "Values at fault: ");
	/* the same values with their kinds for machines (refusal.h) */
	initStringInfo(&line);
	claims_refusal_line_start(&line);
	for (int i = 0; i < nfailed; i++)
	{
		char	   *label = claims_bucket_label(failed[i].m->bucket_type,
												failed[i].m->bucket_value,
												failed[i].m->bucket_value_len);

		claims_refusal_line_add(&line, failed[i].kind,
								claims_bucket_type_subject(failed[i].m->bucket_type),
								failed[i].m->bucket_value, failed[i].m->bucket_value_len);

		if (first == NULL && failed[i].kind == worst)
			first = label;
		if (failed[i].kind == CLAIMS_PERMANENT || failed[i].kind == CLAIMS_TEMPORARY)
			claims_stats_count_type(failed[i].m->bucket_type,
									failed[i].kind == CLAIMS_PERMANENT ?
									CLAIMS_TYPE_STAT_CONFLICTS_PERMANENT :
									CLAIMS_TYPE_STAT_CONFLICTS_TEMPORARY, 1);
		appendStringInfo(&detail, "%s%s (%s)", i > 0 ? ", " : "", label,
						 failure_words[failed[i].kind]);
	}
	appendStringInfoChar(&detail, '.');
#ifndef CLAIMS_LEGACY_REFUSALS
	appendBinaryStringInfo(&detail, line.data, line.len);
#endif

	switch (worst)
	{
		case CLAIMS_NOT_FOUND:
			claims_stats_count_cell(CLAIMS_STAT_NOT_FOUND, req->cell_id);
			ereport(ERROR,
					(errcode(CLAIMS_ERRCODE(CLAIMS_SQLSTATE_NOT_FOUND)),
					 errmsg("cannot destroy %s: the value is not claimed", first),
					 errdetail_internal("%s", detail.data)));
			break;
		case CLAIMS_NOT_OWNER:
			claims_stats_count_cell(CLAIMS_STAT_OWNERSHIP, req->cell_id);
			ereport(ERROR,
					(errcode(CLAIMS_ERRCODE(CLAIMS_SQLSTATE_NOT_PERMITTED)),
					 errmsg("cannot destroy %s: the value belongs to another cell", first),
					 errdetail_internal("%s", detail.data)));
			break;
		case CLAIMS_PERMANENT:
			claims_stats_count_cell(CLAIMS_STAT_CONFLICTS_PERMANENT, req->cell_id);
			ereport(ERROR,
					(errcode(CLAIMS_ERRCODE(CLAIMS_SQLSTATE_TAKEN)),
					 errmsg("%s is already claimed", first),
					 errdetail_internal("%s", detail.data)));
			break;
		default:
			claims_stats_count_cell(CLAIMS_STAT_CONFLICTS_TEMPORARY, req->cell_id);
			ereport(ERROR,
					(errcode(CLAIMS_ERRCODE(CLAIMS_SQLSTATE_LEASED)),
					 errmsg("%s is under another lease", first),
					 errdetail_internal("%s", detail.data),
					 errhint("The lease holding it is still outstanding; try again later.")));
			break;
	}
}

/*
 * A begin_update whose lease uuid exists already: the same cell's identical
 * request gets the same answer, once the lease is as durable as the first
 * call would have made it; anything else fails.
 */
static void
claims_check_repeated_begin(Jsonb *request, ClaimsBeginRequest *req)
{
	Datum		arg = UUIDPGetDatum(&req->lease_uuid);
	int			ret;
	bool		isnull;
	int64		owner;
	Jsonb	   *payload;
	char	   *uuid = claims_uuid_string(&req->lease_uuid);

	ret = claims_execute(CLAIMS_PLAN_LEASE_LOOKUP, &arg, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims: lease lookup failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
	{
		claims_stats_count_cell(CLAIMS_STAT_MALFORMED, req->cell_id);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid request at $.lease_uuid: lease %s was already used", uuid)));
	}

	owner = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	payload = DatumGetJsonbP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	if (owner != req->cell_id)
	{
		claims_stats_count_cell(CLAIMS_STAT_OWNERSHIP, req->cell_id);
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("lease %s belongs to another cell", uuid)));
	}
	if (compareJsonbContainers(&payload->root, &request->root) != 0)
	{
		claims_stats_count_cell(CLAIMS_STAT_MALFORMED, req->cell_id);
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid request at $.lease_uuid: lease %s was already used for a different request", uuid),
				 errhint("A retry must repeat its request exactly; a new request needs a new lease uuid.")));
	}
	claims_repeat_durable();
}

/*
 * claims_begin_update(request jsonb) returns jsonb
 */
Datum
claims_begin_update(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	ClaimsCall	call;
	Jsonb	   *request;
	ClaimsBeginRequest req;
	ClaimsBatchOp *ops;
	int			nops;
	pg_uuid_t  *uuids;
	pg_uuid_t	lease_uuid;
	Datum		args[15];
	char		nulls[15];
	Datum	   *d_op,
			   *d_type,
			   *d_value,
			   *d_digest,
			   *d_stype,
			   *d_sid,
			   *d_srctype,
			   *d_srcid,
			   *d_udata,
			   *d_uuid,
			   *d_placeholder;
	bool	   *n_subject,
			   *n_source,
			   *n_udata;
	int			nplaceholders = 0;
	int			ret;
	bool		isnull;
	int64		lease_inserted,
				touched,
				placeholders;
	ClaimsJson	js;
	Jsonb	   *result;

	claims_stats_count(CLAIMS_STAT_BEGIN_UPDATES);
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("request must not be NULL")));
	claims_check_writable("claims_begin_update");
	request = PG_GETARG_JSONB_P(0);

	claims_spi_begin(fcinfo, &call);
	claims_parse_begin(request, &req);
	claims_stats_begin_update_cell(req.cell_id);
	ops = claims_build_ops(&req, &nops);

	uuids = palloc(sizeof(pg_uuid_t) * (nops + 1));
	claims_uuid7_fill(uuids, nops + 1);
	lease_uuid = req.has_lease_uuid ? req.lease_uuid : uuids[0];
	for (int i = 0; i < nops; i++)
		ops[i].uuid = uuids[i + 1];

	d_op = palloc(sizeof(Datum) * nops);
	d_type = palloc(sizeof(Datum) * nops);
	d_value = palloc(sizeof(Datum) * nops);
	d_digest = palloc(sizeof(Datum) * nops);
	d_stype = palloc(sizeof(Datum) * nops);
	d_sid = palloc(sizeof(Datum) * nops);
	d_srctype = palloc(sizeof(Datum) * nops);
	d_srcid = palloc(sizeof(Datum) * nops);
	d_udata = palloc(sizeof(Datum) * nops);
	d_uuid = palloc(sizeof(Datum) * nops);
	d_placeholder = palloc(sizeof(Datum) * nops);
	n_subject = palloc(sizeof(bool) * nops);
	n_source = palloc(sizeof(bool) * nops);
	n_udata = palloc(sizeof(bool) * nops);

	for (int i = 0; i < nops; i++)
	{
		ClaimsMetadata *m = ops[i].m;

		d_op[i] = Int16GetDatum((int16) ops[i].op);
		d_type[i] = Int32GetDatum(m->bucket_type);
		d_value[i] = PointerGetDatum(cstring_to_text_with_len(m->bucket_value, m->bucket_value_len));
		d_digest[i] = claims_digest_datum(m->digest);
		n_subject[i] = !m->has_subject;
		d_stype[i] = Int32GetDatum(m->subject_type);
		d_sid[i] = Int64GetDatum(m->subject_id);
		n_source[i] = !m->has_source;
		d_srctype[i] = Int32GetDatum(m->source_type);
		d_srcid[i] = PointerGetDatum(m->source_id);
		n_udata[i] = (m->user_data == NULL);
		d_udata[i] = PointerGetDatum(m->user_data);
		d_uuid[i] = UUIDPGetDatum(&ops[i].uuid);
		if (ops[i].op != CLAIMS_OP_CREATE)
			d_placeholder[nplaceholders++] = UUIDPGetDatum(&ops[i].uuid);
	}

	args[0] = UUIDPGetDatum(&lease_uuid);
	args[1] = Int64GetDatum(req.cell_id);
	args[2] = JsonbPGetDatum(request);
	args[3] = claims_array(d_op, NULL, nops, INT2OID);
	args[4] = claims_array(d_type, NULL, nops, INT4OID);
	args[5] = claims_array(d_value, NULL, nops, TEXTOID);
	args[6] = claims_array(d_digest, NULL, nops, BYTEAOID);
	args[7] = claims_array(d_stype, n_subject, nops, INT4OID);
	args[8] = claims_array(d_sid, n_subject, nops, INT8OID);
	args[9] = claims_array(d_srctype, n_source, nops, INT4OID);
	args[10] = claims_array(d_srcid, n_source, nops, BYTEAOID);
	args[11] = claims_array(d_udata, n_udata, nops, JSONBOID);
	args[12] = claims_array(d_uuid, NULL, nops, UUIDOID);
	args[13] = claims_array(d_placeholder, NULL, nplaceholders, UUIDOID);
	args[14] = BoolGetDatum(nplaceholders == 0);	/* creates only */
	memset(nulls, ' ', sizeof(nulls));

	ret = claims_execute(req.has_lease_uuid ? CLAIMS_PLAN_BEGIN : CLAIMS_PLAN_BEGIN_NEW_LEASE,
						 args, nulls, false, 0);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "claims: begin_update statement returned %s", SPI_result_code_string(ret));
	lease_inserted = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	touched = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	placeholders = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));

	if (lease_inserted == 0)
		claims_check_repeated_begin(request, &req);
	else if (touched != nops || placeholders != 0)
		claims_report_failures(&req, ops, nops, &lease_uuid);
	else
	{
		claims_stats_count_begin_cell(req.cell_id, req.ncreates, req.ndestroys, nops);
		claims_count_types(ops, nops);
	}

	MemoryContextSwitchTo(caller);
	claims_json_init(&js);
	claims_json_begin_object(&js);
	claims_json_key(&js, "cell_id");
	claims_json_int64_string(&js, req.cell_id);
	claims_json_key(&js, "lease_uuid");
	claims_json_uuid(&js, &lease_uuid);
	claims_json_end_object(&js);
	result = claims_json_finish(&js);

	claims_spi_end(&call);
	PG_RETURN_JSONB_P(result);
}
