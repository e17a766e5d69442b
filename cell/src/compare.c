/*-------------------------------------------------------------------------
 *
 * compare.c
 *	  verify()'s comparison of one batch: the entries the rows of a source
 *	  id range should hold at the store (arrays read by verify_slice())
 *	  against the store's records of the range, read from the text of the
 *	  listing pages (no jsonb is built of them). Both sides are sorted by
 *	  (bucket type, value) and merged in one pass; each entry or record
 *	  gets the kind the SQL comparison of claims_cell 1.4 gave it.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"
#include "malloc_thresholds.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/base64.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/jsonfuncs.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

PG_FUNCTION_INFO_V1(claims_cell_store_list_records_page);
PG_FUNCTION_INFO_V1(claims_cell_verify_compare);
PG_FUNCTION_INFO_V1(claims_cell_verify_keep_fixes);

/* One entry a row should hold (an element of verify_slice()'s expected). */
typedef struct VerifyEntry
{
	char	   *sid;
	char	   *pk;
	char	   *bucket_type;
	char	   *value;
	char	   *subject_type;
	JsonbValue	subject_id;		/* jbvNull when absent */
	char	   *subject_id_text;
	char	   *source_type;
	char	   *col;
} VerifyEntry;

/* Decode a base64 source id to lower-case hex, as encode(decode(x)). */
static char *
verify_sid_hex(const char *b64)
{
	int			len = strlen(b64);
	int			maxlen = pg_b64_dec_len(len);
	char	   *raw = palloc(maxlen + 1);
	int			n = pg_b64_decode(b64, len, raw, maxlen);
	char	   *hex;
	static const char digits[] = "0123456789abcdef";

	if (n < 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the claims store listed a record with an invalid source id \"%s\"", b64)));
	hex = palloc(n * 2 + 1);
	for (int i = 0; i < n; i++)
	{
		hex[2 * i] = digits[((unsigned char) raw[i]) >> 4];
		hex[2 * i + 1] = digits[((unsigned char) raw[i]) & 0xF];
	}
	hex[2 * n] = '\0';
	pfree(raw);
	return hex;
}

/* Does a nullable C string equal a literal? */
static inline bool
cell_streq(const char *a, const char *b)
{
	return a != NULL && strcmp(a, b) == 0;
}

/*
 * Is the page the store's last one? Its text ends with the top-level
 * "truncated" member, as the store's jsonb output lays it out: ...],
 * "truncated": false}. A truncated page is read for its last record's
 * source id: the text near its end may be a record's user_data, any JSON
 * a client gave, keys included.
 */
static bool
verify_page_is_last(const char *page)
{
	static const char t_false[] = "\"truncated\": false}";
	size_t		len = strlen(page);
	size_t		tlen = sizeof(t_false) - 1;

	return len >= tlen && memcmp(page + len - tlen, t_false, tlen) == 0;
}

/*
 * store_list_records_page(server name, request jsonb, OUT page text, OUT
 * truncated boolean, OUT last_source_id text): one page of
 * claims_list_records as the text the store sent, whether it says it is
 * truncated, and its last record's source id (base64), read from the text
 * without building jsonb. Raises what the store raises, 08006 when it
 * cannot be reached, 08P01 when the page is not JSON.
 */
Datum
claims_cell_store_list_records_page(PG_FUNCTION_ARGS)
{
	char	   *page;
	bool		truncated = false;
	char	   *last_sid = NULL;
	TupleDesc	tupdesc;
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	cell_require_identity();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	claims_set_malloc_thresholds();
	page = cell_call_listing_text(NameStr(*PG_GETARG_NAME(0)), PG_GETARG_DATUM(1),
								  "claims_list_records",
								  "the claims store refused to list this cell's records");
	if (!verify_page_is_last(page))
		listing_read_page(page, strlen(page), NULL, &truncated, &last_sid);
	values[0] = CStringGetTextDatum(page);
	values[1] = BoolGetDatum(truncated);
	if (last_sid != NULL)
		values[2] = CStringGetTextDatum(last_sid);
	else
		nulls[2] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* Read the records of every listing page of a text[] into out. */
static void
verify_parse_pages(ArrayType *pages, VerifyRecords *out)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(pages, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		text	   *t;
		int			first = out->n;
		bool		truncated;
		char	   *last_sid;

		if (nulls[i])
			continue;
		t = DatumGetTextPP(elems[i]);
		listing_read_page(VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t), out, &truncated, &last_sid);
		for (int j = first; j < out->n; j++)
			if (out->recs[j].sid != NULL)
				out->recs[j].sid = verify_sid_hex(out->recs[j].sid);
	}
}

/* Compare two nullable C strings bytewise, NULL last. */
static int
cell_strcmp_null(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return (a == NULL) - (b == NULL);
	return strcmp(a, b);
}

/* Order of records by (bucket type, value). */
static int
verify_record_cmp(const void *a, const void *b)
{
	const VerifyRecord *x = (const VerifyRecord *) a;
	const VerifyRecord *y = (const VerifyRecord *) b;
	int			c = cell_strcmp_null(x->bucket_type, y->bucket_type);

	return c != 0 ? c : cell_strcmp_null(x->value, y->value);
}

/* Order of entries by (bucket type, value). */
static int
verify_entry_cmp(const void *a, const void *b)
{
	const VerifyEntry *x = (const VerifyEntry *) a;
	const VerifyEntry *y = (const VerifyEntry *) b;
	int			c = cell_strcmp_null(x->bucket_type, y->bucket_type);

	return c != 0 ? c : cell_strcmp_null(x->value, y->value);
}

/* The same order, then by row key: duplicates are named in a fixed order. */
static int
verify_entry_sort_cmp(const void *a, const void *b)
{
	int			c = verify_entry_cmp(a, b);

	return c != 0 ? c : cell_strcmp_null(((const VerifyEntry *) a)->pk, ((const VerifyEntry *) b)->pk);
}

/* Order of an entry against a record by (bucket type, value). */
static int
verify_entry_record_cmp(const VerifyEntry *e, const VerifyRecord *r)
{
	int			c = cell_strcmp_null(e->bucket_type, r->bucket_type);

	return c != 0 ? c : cell_strcmp_null(e->value, r->value);
}

/* Are two text[] listings the same pages, byte for byte? */
static bool
verify_pages_equal(ArrayType *a, ArrayType *b)
{
	Datum	   *ea;
	Datum	   *eb;
	bool	   *na;
	bool	   *nb;
	int			n;
	int			m;

	deconstruct_array(a, TEXTOID, -1, false, TYPALIGN_INT, &ea, &na, &n);
	deconstruct_array(b, TEXTOID, -1, false, TYPALIGN_INT, &eb, &nb, &m);
	if (n != m)
		return false;
	for (int i = 0; i < n; i++)
	{
		text	   *x;
		text	   *y;

		if (na[i] || nb[i])
		{
			if (na[i] != nb[i])
				return false;
			continue;
		}
		x = DatumGetTextPP(ea[i]);
		y = DatumGetTextPP(eb[i]);
		if (VARSIZE_ANY_EXHDR(x) != VARSIZE_ANY_EXHDR(y) ||
			memcmp(VARDATA_ANY(x), VARDATA_ANY(y), VARSIZE_ANY_EXHDR(x)) != 0)
			return false;
	}
	return true;
}

/* The C strings of a text[] (NULL: none) of n elements, NULL for NULL. */
static char **
verify_text_column(ArrayType *arr, int n, const char *name)
{
	Datum	   *elems;
	bool	   *nulls;
	int			count;
	char	  **out = palloc0(sizeof(char *) * Max(n, 1));

	if (arr == NULL)
		return out;
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	if (count != n)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array argument \"%s\" has %d elements, but \"sids\" has %d",
						name, count, n)));
	for (int i = 0; i < n; i++)
		out[i] = nulls[i] ? NULL : TextDatumGetCString(elems[i]);
	return out;
}

/*
 * The expected entries, one per element of the parallel arrays of
 * verify_slice()'s read of the rows (all NULL: none), sorted.
 */
static VerifyEntry *
verify_entries(FunctionCallInfo fcinfo, int *n)
{
	ArrayType  *sids = PG_ARGISNULL(0) ? NULL : PG_GETARG_ARRAYTYPE_P(0);
	int			count = sids ? ArrayGetNItems(ARR_NDIM(sids), ARR_DIMS(sids)) : 0;
	char	  **sid = verify_text_column(sids, count, "sids");
	char	  **pk = verify_text_column(PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1), count, "pks");
	char	  **bt = verify_text_column(PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2), count, "bucket_types");
	char	  **val = verify_text_column(PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3), count, "values");
	char	  **st = verify_text_column(PG_ARGISNULL(4) ? NULL : PG_GETARG_ARRAYTYPE_P(4), count, "subject_types");
	char	  **srt = verify_text_column(PG_ARGISNULL(6) ? NULL : PG_GETARG_ARRAYTYPE_P(6), count, "source_types");
	char	  **col = verify_text_column(PG_ARGISNULL(7) ? NULL : PG_GETARG_ARRAYTYPE_P(7), count, "cols");
	Datum	   *sj = NULL;
	bool	   *sjnull = NULL;
	int			nsj = 0;
	VerifyEntry *es = palloc0(sizeof(VerifyEntry) * Max(count, 1));

	if (!PG_ARGISNULL(5))
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(5), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &sj, &sjnull, &nsj);
	if (nsj != count)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array argument \"%s\" has %d elements, but \"sids\" has %d",
						"subject_ids", nsj, count)));
	for (int i = 0; i < count; i++)
	{
		VerifyEntry *e = &es[i];

		e->sid = sid[i];
		e->pk = pk[i];
		e->bucket_type = bt[i];
		e->value = val[i];
		e->subject_type = st[i];
		e->source_type = srt[i];
		e->col = col[i];
		if (sjnull[i])
			e->subject_id.type = jbvNull;
		else
		{
			e->subject_id.type = jbvNumeric;
			e->subject_id.val.numeric = DatumGetNumeric(DirectFunctionCall1(int8_numeric, sj[i]));
			e->subject_id_text = psprintf(INT64_FORMAT, DatumGetInt64(sj[i]));
		}
	}
	qsort(es, count, sizeof(VerifyEntry), verify_entry_sort_cmp);
	*n = count;
	return es;
}

/* The strings of a text[] (NULL: none), sorted, for bsearch. */
static char **
verify_string_set(ArrayType *arr, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	int			count;
	int			k = 0;
	char	  **set;

	*n = 0;
	if (arr == NULL)
		return NULL;
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &count);
	set = palloc(sizeof(char *) * Max(count, 1));
	for (int i = 0; i < count; i++)
		if (!nulls[i])
			set[k++] = TextDatumGetCString(elems[i]);
	qsort(set, k, sizeof(char *), pg_qsort_strcmp);
	*n = k;
	return set;
}

/* Is s (nullable) in a sorted string set? */
static bool
verify_in_set(char **set, int n, const char *s)
{
	if (s == NULL || n == 0)
		return false;
	return bsearch(&s, set, n, sizeof(char *), pg_qsort_strcmp) != NULL;
}

/* The comparison's inputs and totals. */
typedef struct VerifyCompare
{
	char	  **recent;
	int			nrecent;
	char	  **moved;
	int			nmoved;
	TimestampTz cutoff;
	int64		n_duplicate;
	int64		n_fixes;
	int64		n_recent;
	StringInfoData duplicates;
	JsonbParseState *fixes;
} VerifyCompare;

/*
 * Is the store's side of a value recent: its source id among the recent
 * rows', changed between the two listings, not ACTIVE, or updated after
 * the cutoff? r is NULL when the store has no record of the value.
 */
static bool
verify_record_recent(VerifyCompare *vc, VerifyRecord *r, bool changed)
{
	if (r == NULL)
		return false;
	if (changed || verify_in_set(vc->recent, vc->nrecent, r->sid))
		return true;
	if (r->status != NULL && strcmp(r->status, "ACTIVE") != 0)
		return true;
	if (r->updated_at != NULL)
	{
		TimestampTz t = DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in,
																CStringGetDatum(r->updated_at),
																ObjectIdGetDatum(InvalidOid),
																Int32GetDatum(-1)));

		if (t > vc->cutoff)
			return true;
	}
	return false;
}

/* Add a string member (JSON null for NULL) to the object being built. */
static void
verify_push_member(JsonbParseState **st, const char *key, const char *val)
{
	JsonbValue	k;
	JsonbValue	v;

	k.type = jbvString;
	k.val.string.val = (char *) key;
	k.val.string.len = strlen(key);
	pushJsonbValue(st, WJB_KEY, &k);
	if (val == NULL)
		v.type = jbvNull;
	else
	{
		v.type = jbvString;
		v.val.string.val = (char *) val;
		v.val.string.len = strlen(val);
	}
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* One fix of kind "missing", "extra" or "drifted", as the SQL built it. */
static void
verify_add_fix(VerifyCompare *vc, const char *kind, VerifyEntry *e, VerifyRecord *r)
{
	JsonbValue	k;

	pushJsonbValue(&vc->fixes, WJB_BEGIN_OBJECT, NULL);
	verify_push_member(&vc->fixes, "kind", kind);
	verify_push_member(&vc->fixes, "pk", e ? e->pk : NULL);
	verify_push_member(&vc->fixes, "col", e ? e->col : NULL);
	verify_push_member(&vc->fixes, "sid", e ? e->sid : NULL);
	verify_push_member(&vc->fixes, "bucket_type", e ? e->bucket_type : r->bucket_type);
	verify_push_member(&vc->fixes, "value", e ? e->value : r->value);
	verify_push_member(&vc->fixes, "subject_type", e ? e->subject_type : NULL);
	k.type = jbvString;
	k.val.string.val = "subject_id";
	k.val.string.len = strlen("subject_id");
	pushJsonbValue(&vc->fixes, WJB_KEY, &k);
	if (e != NULL && e->subject_id.type == jbvNumeric)
		pushJsonbValue(&vc->fixes, WJB_VALUE, &e->subject_id);
	else
	{
		JsonbValue	null;

		null.type = jbvNull;
		pushJsonbValue(&vc->fixes, WJB_VALUE, &null);
	}
	verify_push_member(&vc->fixes, "source_type", e ? e->source_type : NULL);
	pushJsonbValue(&vc->fixes, WJB_END_OBJECT, NULL);
	vc->n_fixes++;
}

/* Is "bucket_type:value" among the values moved by earlier batches? */
static bool
verify_moved(VerifyCompare *vc, VerifyEntry *e)
{
	char	   *key;
	bool		found;

	if (vc->nmoved == 0 || e->bucket_type == NULL || e->value == NULL)
		return false;
	key = psprintf("%s:%s", e->bucket_type, e->value);
	found = verify_in_set(vc->moved, vc->nmoved, key);
	pfree(key);
	return found;
}

/*
 * Classify one entry against the store's record of its value (r NULL:
 * none; changed: the two listings differ on it), group: how many entries
 * hold the value. The order of the tests is the 1.4 SQL's CASE.
 */
static void
verify_classify_entry(VerifyCompare *vc, VerifyEntry *e, VerifyRecord *r, bool changed, int group)
{
	if (verify_in_set(vc->recent, vc->nrecent, e->sid) || verify_record_recent(vc, r, changed))
		vc->n_recent++;
	else if (group > 1)
	{
		vc->n_duplicate++;
		if (vc->duplicates.len > 0)
			appendStringInfoString(&vc->duplicates, ", ");
		appendStringInfo(&vc->duplicates, "%s=%s (rows %s)",
						 e->bucket_type ? e->bucket_type : "", e->value ? e->value : "",
						 e->pk ? e->pk : "");
	}
	else if (r == NULL)
	{
		if (!verify_moved(vc, e))
			verify_add_fix(vc, "missing", e, NULL);
	}
	else if (e->sid != NULL && r->sid != NULL && strcmp(e->sid, r->sid) == 0 &&
			 e->subject_type != NULL && r->subject_type != NULL &&
			 strcmp(e->subject_type, r->subject_type) == 0 &&
			 e->subject_id_text != NULL && r->subject_id != NULL &&
			 strcmp(e->subject_id_text, r->subject_id) == 0 &&
			 e->source_type != NULL && r->source_type != NULL &&
			 strcmp(e->source_type, r->source_type) == 0)
		 /* ok */ ;
	else
		verify_add_fix(vc, "drifted", e, r);
}

/* Has a record no bucket type or value (it can match nothing)? */
static inline bool
verify_record_unkeyed(const VerifyRecord *r)
{
	return r->bucket_type == NULL || r->value == NULL;
}

/*
 * The store's side: the two listings merged by value, the first's record
 * kept where both have it (as COALESCE(r1, r2)), changed where they differ.
 * A record without a bucket type or value matches nothing, not even itself
 * in the other listing (SQL's = on NULL in the full join of 1.4): it comes
 * once from each listing, changed, even when the listings are the same.
 */
static VerifyRecord *
verify_merge_listings(VerifyRecords *r1, VerifyRecords *r2, bool same, bool **changed, int *n)
{
	VerifyRecords *second = same ? r1 : r2;
	int			max = r1->n + second->n;
	VerifyRecord *out = palloc(sizeof(VerifyRecord) * Max(max, 1));
	bool	   *ch = palloc(sizeof(bool) * Max(max, 1));
	int			i = 0,
				j = 0,
				k = 0;

	qsort(r1->recs, r1->n, sizeof(VerifyRecord), verify_record_cmp);
	if (!same)
		qsort(r2->recs, r2->n, sizeof(VerifyRecord), verify_record_cmp);
	while (i < r1->n || j < second->n)
	{
		int			c;

		if (j >= second->n)
			c = -1;
		else if (i >= r1->n)
			c = 1;
		else if (verify_record_unkeyed(&r1->recs[i]))
			c = -1;
		else if (verify_record_unkeyed(&second->recs[j]))
			c = 1;
		else
			c = verify_record_cmp(&r1->recs[i], &second->recs[j]);
		if (c < 0)
		{
			out[k] = r1->recs[i++];
			ch[k++] = true;
		}
		else if (c > 0)
		{
			out[k] = second->recs[j++];
			ch[k++] = true;
		}
		else
		{
			VerifyRecord *a = &r1->recs[i++];
			VerifyRecord *b = &second->recs[j++];

			out[k] = *a;
			ch[k++] = a->textlen != b->textlen || memcmp(a->text, b->text, a->textlen) != 0;
		}
	}
	*changed = ch;
	*n = k;
	return out;
}

/*
 * The merge of the sorted entries and the sorted store records. A record
 * or entry with a NULL bucket type or value matches nothing (SQL's = on
 * NULL), as in the 1.4 full join.
 */
static void
verify_merge(VerifyCompare *vc, VerifyEntry *es, int ne, VerifyRecord *rs, bool *changed, int nr)
{
	int			i = 0,
				j = 0;

	while (i < ne || j < nr)
	{
		int			c;

		if (i >= ne)
			c = 1;
		else if (j >= nr)
			c = -1;
		else if (es[i].bucket_type == NULL || es[i].value == NULL)
			c = -1;
		else if (rs[j].bucket_type == NULL || rs[j].value == NULL)
			c = 1;
		else
			c = verify_entry_record_cmp(&es[i], &rs[j]);
		if (c > 0)
		{
			/* a record no row holds */
			if (verify_record_recent(vc, &rs[j], changed[j]))
				vc->n_recent++;
			else
				verify_add_fix(vc, "extra", NULL, &rs[j]);
			j++;
			continue;
		}
		else
		{
			int			g = 1;
			bool		matched = (c == 0);
			bool		keyed = es[i].bucket_type != NULL && es[i].value != NULL;

			while (keyed && i + g < ne && verify_entry_cmp(&es[i], &es[i + g]) == 0)
				g++;
			for (int k = 0; k < g; k++)
				verify_classify_entry(vc, &es[i + k], matched ? &rs[j] : NULL,
									  matched ? changed[j] : false, g);
			i += g;
			if (matched)
				j++;
		}
	}
}

/*
 * verify_compare(sids text[], pks text[], bucket_types text[], "values"
 * text[], subject_types text[], subject_ids bigint[], source_types text[],
 * cols text[], stored text[], stored2 text[], recent_sids text[], moved
 * text[], cutoff timestamptz, OUT n_duplicate bigint, OUT n_fixes bigint,
 * OUT n_recent bigint, OUT duplicates text, OUT fixes jsonb): one batch's
 * comparison (see verify_slice()); the first eight arrays are the entries
 * the rows should hold, element by element.
 */
Datum
claims_cell_verify_compare(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext work;
	TupleDesc	tupdesc;
	Datum		values[5];
	bool		nulls[5] = {false, false, false, false, false};
	VerifyCompare vc;
	VerifyRecords r1 = {NULL, 0, 0};
	VerifyRecords r2 = {NULL, 0, 0};
	VerifyEntry *es;
	int			ne;
	VerifyRecord *rs;
	bool	   *changed;
	int			nr;
	bool		same;
	JsonbValue *fixes;
	ArrayType  *s1;
	ArrayType  *s2;
	Datum		result;

	if (PG_ARGISNULL(8) || PG_ARGISNULL(9) || PG_ARGISNULL(12))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments \"stored\", \"stored2\" and \"cutoff\" must not be null")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	claims_set_malloc_thresholds();

	work = AllocSetContextCreate(CurrentMemoryContext, "claims_cell verify_compare",
								 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(work);
	memset(&vc, 0, sizeof(vc));
	vc.cutoff = PG_GETARG_TIMESTAMPTZ(12);
	vc.recent = verify_string_set(PG_ARGISNULL(10) ? NULL : PG_GETARG_ARRAYTYPE_P(10), &vc.nrecent);
	vc.moved = verify_string_set(PG_ARGISNULL(11) ? NULL : PG_GETARG_ARRAYTYPE_P(11), &vc.nmoved);
	initStringInfo(&vc.duplicates);

	es = verify_entries(fcinfo, &ne);
	s1 = PG_GETARG_ARRAYTYPE_P(8);
	s2 = PG_GETARG_ARRAYTYPE_P(9);
	verify_parse_pages(s1, &r1);
	same = verify_pages_equal(s1, s2);
	if (!same)
		verify_parse_pages(s2, &r2);
	rs = verify_merge_listings(&r1, &r2, same, &changed, &nr);

	pushJsonbValue(&vc.fixes, WJB_BEGIN_ARRAY, NULL);
	verify_merge(&vc, es, ne, rs, changed, nr);
	fixes = pushJsonbValue(&vc.fixes, WJB_END_ARRAY, NULL);

	MemoryContextSwitchTo(caller);
	values[0] = Int64GetDatum(vc.n_duplicate);
	values[1] = Int64GetDatum(vc.n_fixes);
	values[2] = Int64GetDatum(vc.n_recent);
	if (vc.n_duplicate > 0)
		values[3] = CStringGetTextDatum(vc.duplicates.data);
	else
		nulls[3] = true;
	values[4] = JsonbPGetDatum(JsonbValueToJsonb(fixes));
	result = HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
	MemoryContextDelete(work);
	PG_RETURN_DATUM(result);
}

/* A string member of a jsonb object, or NULL (absent or JSON null). */
static char *
verify_jsonb_string(JsonbContainer *obj, const char *key, JsonbValue *buf)
{
	JsonbValue *v = getKeyJsonValueFromContainer(obj, key, strlen(key), buf);

	if (v == NULL || v->type == jbvNull)
		return NULL;
	if (v->type == jbvString)
		return pnstrdup(v->val.string.val, v->val.string.len);
	if (v->type == jbvNumeric)
		return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("member \"%s\" of a fix is neither a string nor a number", key)));
	return NULL;
}

/* One row's entry as the re-read of fixed rows gives it. */
typedef struct VerifyHeld
{
	char	   *sid;
	char	   *bucket_type;
	char	   *value;
	char	   *subject_id;
} VerifyHeld;

/* Order of held entries by all four fields, bytewise. */
static int
verify_held_cmp(const void *a, const void *b)
{
	const VerifyHeld *x = (const VerifyHeld *) a;
	const VerifyHeld *y = (const VerifyHeld *) b;
	int			c;

	if ((c = cell_strcmp_null(x->sid, y->sid)) != 0)
		return c;
	if ((c = cell_strcmp_null(x->bucket_type, y->bucket_type)) != 0)
		return c;
	if ((c = cell_strcmp_null(x->value, y->value)) != 0)
		return c;
	return cell_strcmp_null(x->subject_id, y->subject_id);
}

/*
 * The held entries of the parallel arrays (arguments 1 to 4 of
 * verify_keep_fixes) whose source id is not recent, sorted.
 */
static VerifyHeld *
verify_held(FunctionCallInfo fcinfo, char **recent, int nrecent, int *n)
{
	ArrayType  *sids = PG_ARGISNULL(1) ? NULL : PG_GETARG_ARRAYTYPE_P(1);
	int			count = sids ? ArrayGetNItems(ARR_NDIM(sids), ARR_DIMS(sids)) : 0;
	char	  **sid = verify_text_column(sids, count, "sids");
	char	  **bt = verify_text_column(PG_ARGISNULL(2) ? NULL : PG_GETARG_ARRAYTYPE_P(2), count, "bucket_types");
	char	  **val = verify_text_column(PG_ARGISNULL(3) ? NULL : PG_GETARG_ARRAYTYPE_P(3), count, "values");
	Datum	   *sj = NULL;
	bool	   *sjnull = NULL;
	int			nsj = 0;
	VerifyHeld *hs = palloc0(sizeof(VerifyHeld) * Max(count, 1));
	int			k = 0;

	if (!PG_ARGISNULL(4))
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(4), INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
						  &sj, &sjnull, &nsj);
	if (nsj != count)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("array argument \"%s\" has %d elements, but \"sids\" has %d",
						"subject_ids", nsj, count)));
	for (int i = 0; i < count; i++)
	{
		if (verify_in_set(recent, nrecent, sid[i]))
			continue;
		hs[k].sid = sid[i];
		hs[k].bucket_type = bt[i];
		hs[k].value = val[i];
		hs[k].subject_id = sjnull[i] ? NULL : psprintf(INT64_FORMAT, DatumGetInt64(sj[i]));
		k++;
	}
	qsort(hs, k, sizeof(VerifyHeld), verify_held_cmp);
	*n = k;
	return hs;
}

/*
 * verify_keep_fixes(fixes jsonb, sids text[], bucket_types text[],
 * "values" text[], subject_ids bigint[], recent_sids text[], OUT fixes
 * jsonb, OUT skipped integer): the fixes still due after the rows of the
 * differences were read again. An extra fix stays; any other stays when a
 * row read again, not recent, still holds the same source id, value and
 * subject; the others are skipped (counted), the order kept.
 */
Datum
claims_cell_verify_keep_fixes(PG_FUNCTION_ARGS)
{
	MemoryContext caller = CurrentMemoryContext;
	MemoryContext work;
	TupleDesc	tupdesc;
	Datum		values[2];
	bool		nulls[2] = {false, false};
	Jsonb	   *fixes;
	char	  **recent;
	int			nrecent;
	VerifyHeld *hs;
	int			nh;
	int			count;
	int32		skipped = 0;
	JsonbParseState *st = NULL;
	JsonbValue *out;
	Datum		result;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument \"fixes\" must not be null")));
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	work = AllocSetContextCreate(CurrentMemoryContext, "claims_cell verify_keep_fixes",
								 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(work);
	fixes = PG_GETARG_JSONB_P(0);
	if (!JB_ROOT_IS_ARRAY(fixes) || JB_ROOT_IS_SCALAR(fixes))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("argument \"fixes\" must be a JSON array")));
	recent = verify_string_set(PG_ARGISNULL(5) ? NULL : PG_GETARG_ARRAYTYPE_P(5), &nrecent);
	hs = verify_held(fcinfo, recent, nrecent, &nh);

	count = JB_ROOT_COUNT(fixes);
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < count; i++)
	{
		JsonbValue *el = getIthJsonbValueFromContainer(&fixes->root, i);
		JsonbValue	buf;
		char	   *kind;
		VerifyHeld	key;
		bool		keep;

		if (el == NULL || el->type != jbvBinary ||
			!JsonContainerIsObject(el->val.binary.data))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("element %d of argument \"fixes\" is not an object", i + 1)));
		kind = verify_jsonb_string(el->val.binary.data, "kind", &buf);
		if (cell_streq(kind, "extra"))
			keep = true;
		else
		{
			key.sid = verify_jsonb_string(el->val.binary.data, "sid", &buf);
			key.bucket_type = verify_jsonb_string(el->val.binary.data, "bucket_type", &buf);
			key.value = verify_jsonb_string(el->val.binary.data, "value", &buf);
			key.subject_id = verify_jsonb_string(el->val.binary.data, "subject_id", &buf);
			keep = key.sid != NULL && key.bucket_type != NULL && key.value != NULL &&
				key.subject_id != NULL &&
				bsearch(&key, hs, nh, sizeof(VerifyHeld), verify_held_cmp) != NULL;
			if (!keep)
				skipped++;
		}
		if (keep)
			pushJsonbValue(&st, WJB_ELEM, el);
	}
	out = pushJsonbValue(&st, WJB_END_ARRAY, NULL);

	MemoryContextSwitchTo(caller);
	values[0] = JsonbPGetDatum(JsonbValueToJsonb(out));
	values[1] = Int32GetDatum(skipped);
	result = HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls));
	MemoryContextDelete(work);
	PG_RETURN_DATUM(result);
}
