/*-------------------------------------------------------------------------
 *
 * json_out.c
 *	  Building responses in the proto3 JSON mapping.
 *
 * Enums by name, int64 as decimal strings, bytes as standard base64 with
 * padding, timestamps in UTC with a Z and 0, 3 or 6 fractional digits.
 * claims.json_output chooses the rest: compat (the default) writes
 * snake_case names, UUIDs as bare strings and every field; proto3 writes
 * what a proto3 JSON printer writes for the claims.v1 message: the fields'
 * json names (lowerCamelCase), a types.v1.UUID as {"value": "..."}, no
 * field holding its default value (0, "", false, an empty list), and only
 * what claims.v1 knows: a type an operator added is written by number, and
 * its claim field is left out.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "access/htup_details.h"
#include "catalog/pg_enum.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/numeric.h"
#include "utils/syscache.h"

/* Token for a value at the current nesting level. */
static JsonbIteratorToken
claims_json_value_token(ClaimsJson *js)
{
	return js->in_array[js->depth] ? WJB_ELEM : WJB_VALUE;
}

/* Start an empty document, in the format claims.json_output names now. */
void
claims_json_init(ClaimsJson *js)
{
	memset(js, 0, sizeof(*js));
	js->proto3 = (claims_json_output == CLAIMS_JSON_OUTPUT_PROTO3);
}

/* Open an object (as a value of the current key or array). */
void
claims_json_begin_object(ClaimsJson *js)
{
	js->result = pushJsonbValue(&js->state, WJB_BEGIN_OBJECT, NULL);
	js->depth++;
	Assert(js->depth < lengthof(js->in_array));
	js->in_array[js->depth] = false;
}

/* Close the innermost object. */
void
claims_json_end_object(ClaimsJson *js)
{
	js->result = pushJsonbValue(&js->state, WJB_END_OBJECT, NULL);
	js->depth--;
}

/* Open an array. */
void
claims_json_begin_array(ClaimsJson *js)
{
	js->result = pushJsonbValue(&js->state, WJB_BEGIN_ARRAY, NULL);
	js->depth++;
	Assert(js->depth < lengthof(js->in_array));
	js->in_array[js->depth] = true;
}

/* Close the innermost array. */
void
claims_json_end_array(ClaimsJson *js)
{
	js->result = pushJsonbValue(&js->state, WJB_END_ARRAY, NULL);
	js->depth--;
}

/*
 * A member name, given in snake_case; proto3 writes the field's json name,
 * lowerCamelCase (as protoc derives it: "lease_uuid" is "leaseUuid").
 */
void
claims_json_key(ClaimsJson *js, const char *key)
{
	JsonbValue	v;
	int			len = strlen(key);

	v.type = jbvString;
	v.val.string.val = (char *) key;
	v.val.string.len = len;
	if (js->proto3 && strchr(key, '_') != NULL)
	{
		char	   *camel = palloc(len + 1);
		int			n = 0;

		for (int i = 0; i < len; i++)
		{
			if (key[i] == '_' && i + 1 < len)
				camel[n++] = pg_ascii_toupper((unsigned char) key[++i]);
			else
				camel[n++] = key[i];
		}
		v.val.string.val = camel;
		v.val.string.len = n;
	}
	js->result = pushJsonbValue(&js->state, WJB_KEY, &v);
}

/* A string value (the bytes must outlive claims_json_finish). */
void
claims_json_string(ClaimsJson *js, const char *s, int len)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = len;
	js->result = pushJsonbValue(&js->state, claims_json_value_token(js), &v);
}

/* A NUL-terminated string value. */
void
claims_json_cstring(ClaimsJson *js, const char *s)
{
	claims_json_string(js, s, strlen(s));
}

/* A boolean value. */
void
claims_json_bool(ClaimsJson *js, bool b)
{
	JsonbValue	v;

	v.type = jbvBool;
	v.val.boolean = b;
	js->result = pushJsonbValue(&js->state, claims_json_value_token(js), &v);
}

/* An int64, as proto3 JSON writes it: a decimal string. */
void
claims_json_int64_string(ClaimsJson *js, int64 n)
{
	char	   *buf = palloc(MAXINT8LEN + 1);
	int			len = pg_lltoa(n, buf);

	claims_json_string(js, buf, len);
}

/* Write n as exactly `digits` decimal digits (n >= 0); returns the end. */
static char *
claims_put_digits(char *p, int n, int digits)
{
	for (int i = digits - 1; i >= 0; i--)
	{
		p[i] = '0' + n % 10;
		n /= 10;
	}
	return p + digits;
}

/* A JSON number. */
void
claims_json_number(ClaimsJson *js, int64 n)
{
	JsonbValue	v;

	v.type = jbvNumeric;
	v.val.numeric = int64_to_numeric(n);
	js->result = pushJsonbValue(&js->state, claims_json_value_token(js), &v);
}

/* Canonical lower-case text of a UUID. */
char *
claims_uuid_string(const pg_uuid_t *u)
{
	static const char hex[] = "0123456789abcdef";
	char	   *buf = palloc(37);
	int			p = 0;

	for (int i = 0; i < UUID_LEN; i++)
	{
		if (i == 4 || i == 6 || i == 8 || i == 10)
			buf[p++] = '-';
		buf[p++] = hex[u->data[i] >> 4];
		buf[p++] = hex[u->data[i] & 0xF];
	}
	buf[p] = '\0';
	return buf;
}

/*
 * A UUID value: a bare string, or in proto3 the types.v1.UUID message,
 * {"value": "..."}.
 */
void
claims_json_uuid(ClaimsJson *js, const pg_uuid_t *u)
{
	if (!js->proto3)
	{
		claims_json_string(js, claims_uuid_string(u), 36);
		return;
	}
	claims_json_begin_object(js);
	claims_json_key(js, "value");
	claims_json_string(js, claims_uuid_string(u), 36);
	claims_json_end_object(js);
}

/* A timestamp value, RFC 3339 in UTC. */
void
claims_json_timestamp(ClaimsJson *js, TimestampTz ts)
{
	struct pg_tm tm;
	fsec_t		fsec;
	char	   *buf;
	char	   *p;

	if (timestamp2tm(ts, NULL, &tm, &fsec, NULL, NULL) != 0 ||
		tm.tm_year < 1 || tm.tm_year > 9999)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range")));

	/* YYYY-MM-DDTHH:MM:SS[.fff|.ffffff]Z */
	buf = palloc(32);
	p = claims_put_digits(buf, tm.tm_year, 4);
	*p++ = '-';
	p = claims_put_digits(p, tm.tm_mon, 2);
	*p++ = '-';
	p = claims_put_digits(p, tm.tm_mday, 2);
	*p++ = 'T';
	p = claims_put_digits(p, tm.tm_hour, 2);
	*p++ = ':';
	p = claims_put_digits(p, tm.tm_min, 2);
	*p++ = ':';
	p = claims_put_digits(p, tm.tm_sec, 2);
	if (fsec != 0)
	{
		*p++ = '.';
		if (fsec % 1000 == 0)
			p = claims_put_digits(p, fsec / 1000, 3);
		else
			p = claims_put_digits(p, fsec, 6);
	}
	*p++ = 'Z';
	claims_json_string(js, buf, p - buf);
}

/* Standard base64 with padding. */
char *
claims_base64_encode(const char *data, int len, int *outlen)
{
	static const char alphabet[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const uint8 *d = (const uint8 *) data;
	char	   *out = palloc(((len + 2) / 3) * 4 + 1);
	int			p = 0;
	int			i;

	for (i = 0; i + 2 < len; i += 3)
	{
		uint32		v = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];

		out[p++] = alphabet[(v >> 18) & 63];
		out[p++] = alphabet[(v >> 12) & 63];
		out[p++] = alphabet[(v >> 6) & 63];
		out[p++] = alphabet[v & 63];
	}
	if (i < len)
	{
		uint32		v = d[i] << 16;

		if (i + 1 < len)
			v |= d[i + 1] << 8;
		out[p++] = alphabet[(v >> 18) & 63];
		out[p++] = alphabet[(v >> 12) & 63];
		out[p++] = (i + 1 < len) ? alphabet[(v >> 6) & 63] : '=';
		out[p++] = '=';
	}
	out[p] = '\0';
	*outlen = p;
	return out;
}

/* A bytes value. */
void
claims_json_bytes(ClaimsJson *js, const char *data, int len)
{
	int			outlen;
	char	   *s = claims_base64_encode(data, len, &outlen);

	claims_json_string(js, s, outlen);
}

/*
 * An enum value by name, or by number when no longer registered; proto3
 * names only the built-in types (claims.v1's own values), since a parser
 * refuses a name its enum lacks and accepts any number.
 */
void
claims_json_enum(ClaimsJson *js, ClaimsRegistryKind kind, int32 id)
{
	const ClaimsTypeEntry *e = claims_type_by_id(kind, id);

	if (e && (e->builtin || !js->proto3))
		claims_json_cstring(js, e->name);
	else
		claims_json_number(js, id);
}

/* A member holding an int64; proto3 leaves out 0, the default. */
void
claims_json_int64_member(ClaimsJson *js, const char *key, int64 v)
{
	if (js->proto3 && v == 0)
		return;
	claims_json_key(js, key);
	claims_json_int64_string(js, v);
}

/* A member holding a string; proto3 leaves out "", the default. */
void
claims_json_string_member(ClaimsJson *js, const char *key, const char *s, int len)
{
	if (js->proto3 && len == 0)
		return;
	claims_json_key(js, key);
	claims_json_string(js, s, len);
}

/* A member holding a bool; proto3 leaves out false, the default. */
void
claims_json_bool_member(ClaimsJson *js, const char *key, bool b)
{
	if (js->proto3 && !b)
		return;
	claims_json_key(js, key);
	claims_json_bool(js, b);
}

/*
 * Open a repeated member of n elements: false (nothing written, nothing to
 * close) when proto3 leaves out an empty list, else the array is open.
 */
bool
claims_json_list_member(ClaimsJson *js, const char *key, uint64 n)
{
	if (js->proto3 && n == 0)
		return false;
	claims_json_key(js, key);
	claims_json_begin_array(js);
	return true;
}

/* A nested JSON document. */
void
claims_json_jsonb(ClaimsJson *js, Jsonb *jb)
{
	JsonbValue	v;

	v.type = jbvBinary;
	v.val.binary.data = &jb->root;
	v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	js->result = pushJsonbValue(&js->state, claims_json_value_token(js), &v);
}

/* The finished document, in the current memory context. */
Jsonb *
claims_json_finish(ClaimsJson *js)
{
	Assert(js->depth == 0);
	return JsonbValueToJsonb(js->result);
}

/* "{USERNAMES=alice}": how messages name a value. */
char *
claims_bucket_label(int32 bucket_type, const char *value, int len)
{
	return claims_label(claims_bucket_type_subject(bucket_type), value, len);
}

/* A bucket type as labels name it: its name, or its number when it has none. */
const char *
claims_bucket_type_subject(int32 bucket_type)
{
	const ClaimsTypeEntry *e = claims_type_by_id(CLAIMS_BUCKET_TYPES, bucket_type);

	if (e)
		return e->name;
	return psprintf("%d", bucket_type);
}

/* A member holding an enum; proto3 leaves out 0 (UNSPECIFIED), the default. */
static void
claims_json_enum_member(ClaimsJson *js, const char *key, ClaimsRegistryKind kind, int32 id)
{
	if (js->proto3 && id == 0)
		return;
	claims_json_key(js, key);
	claims_json_enum(js, kind, id);
}

/* Attribute numbers of a claim as spi_plans.c's RECORD_COLUMNS select it. */
const AttrNumber claims_record_spi_attnums[CLAIMS_RECORD_NCOLS] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};

/* The status name, whether the column is the enum or its text. */
static char *
claims_record_status(Datum d, Oid typid)
{
	HeapTuple	enumtup;
	char	   *label;

	if (typid == TEXTOID)
		return TextDatumGetCString(d);
	enumtup = SearchSysCache1(ENUMOID, d);
	if (!HeapTupleIsValid(enumtup))
		elog(ERROR, "cache lookup failed for enum value %u", DatumGetObjectId(d));
	label = pstrdup(NameStr(((Form_pg_enum) GETSTRUCT(enumtup))->enumlabel));
	ReleaseSysCache(enumtup);
	return label;
}

/*
 * A claims.v1 Record from a claim row; attnums says where each of the
 * columns of RECORD_COLUMNS (spi_plans.c) is in the tuple. Returns the
 * owning cell's id.
 */
int64
claims_json_record(ClaimsJson *js, HeapTuple tuple, TupleDesc desc, const AttrNumber *attnums)
{
	Datum	   *all_values = palloc(sizeof(Datum) * desc->natts);
	bool	   *all_nulls = palloc(sizeof(bool) * desc->natts);
	Datum		v[CLAIMS_RECORD_NCOLS];
	bool		n[CLAIMS_RECORD_NCOLS];
	int32		bucket_type;
	text	   *value;
	bytea	   *source_id;
	const ClaimsTypeEntry *bt;
	int64		cell_id;

	/* one pass over the tuple, then the columns by position */
	heap_deform_tuple(tuple, desc, all_values, all_nulls);
	for (int c = 0; c < CLAIMS_RECORD_NCOLS; c++)
	{
		v[c] = all_values[attnums[c] - 1];
		n[c] = all_nulls[attnums[c] - 1];
	}
	bucket_type = DatumGetInt32(v[1]);
	value = DatumGetTextPP(v[2]);
	source_id = DatumGetByteaPP(v[6]);
	bt = claims_type_by_id(CLAIMS_BUCKET_TYPES, bucket_type);
	cell_id = DatumGetInt64(v[8]);

	claims_json_begin_object(js);

	claims_json_key(js, "uuid");
	claims_json_uuid(js, DatumGetUUIDP(v[0]));

	claims_json_key(js, "metadata");
	claims_json_begin_object(js);
	claims_json_key(js, "bucket");
	claims_json_begin_object(js);
	claims_json_enum_member(js, "type", CLAIMS_BUCKET_TYPES, bucket_type);
	claims_json_string_member(js, "value", VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
	claims_json_end_object(js);

	claims_json_key(js, "subject");
	claims_json_begin_object(js);
	claims_json_enum_member(js, "type", CLAIMS_SUBJECT_TYPES, DatumGetInt32(v[3]));
	claims_json_int64_member(js, "id", DatumGetInt64(v[4]));
	claims_json_end_object(js);

	claims_json_key(js, "source");
	claims_json_begin_object(js);
	claims_json_enum_member(js, "type", CLAIMS_SOURCE_TYPES, DatumGetInt32(v[5]));
	if (!js->proto3 || VARSIZE_ANY_EXHDR(source_id) > 0)
	{
		claims_json_key(js, "rails_primary_key_id");
		claims_json_bytes(js, VARDATA_ANY(source_id), VARSIZE_ANY_EXHDR(source_id));
	}
	claims_json_end_object(js);

	if (!n[7])
	{
		claims_json_key(js, "user_data");
		claims_json_jsonb(js, DatumGetJsonbP(v[7]));
	}

	/* proto3: types.v1.Claim has fields for the built-in types only */
	if (bt && bt->claim_field && (bt->builtin || !js->proto3))
	{
		claims_json_key(js, "claim");
		claims_json_begin_object(js);
		claims_json_key(js, bt->claim_field);
		claims_json_string(js, VARDATA_ANY(value), VARSIZE_ANY_EXHDR(value));
		claims_json_end_object(js);
	}
	claims_json_end_object(js);

	claims_json_int64_member(js, "cell_id", cell_id);

	claims_json_key(js, "status");
	claims_json_cstring(js, claims_record_status(v[10], TupleDescAttr(desc, attnums[10] - 1)->atttypid));

	if (!n[9])
	{
		claims_json_key(js, "lease_uuid");
		claims_json_uuid(js, DatumGetUUIDP(v[9]));
	}

	claims_json_key(js, "created_at");
	claims_json_timestamp(js, DatumGetTimestampTz(v[11]));
	claims_json_key(js, "updated_at");
	claims_json_timestamp(js, DatumGetTimestampTz(v[12]));

	claims_json_end_object(js);
	return cell_id;
}
