/*-------------------------------------------------------------------------
 *
 * request.c
 *	  Reading requests in the proto3 JSON mapping of claims.v1.
 *
 * Field names in snake_case or lowerCamelCase, enums by name (or older
 * alias) or number, int64 as number or string, bytes as base64 (standard or
 * URL-safe, padding optional), timestamps in RFC 3339. JSON null is the
 * field's default, as proto3 says. Unknown fields are an error, and every
 * error names the JSON path of the field at fault.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "datatype/timestamp.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include <openssl/evp.h>

typedef struct ClaimsField
{
	const char *name;			/* snake_case name */
	bool		present;
	JsonbValue	value;
	const char *given;			/* the spelling the client used */
	int			givenlen;
} ClaimsField;

#define CHILD_PATH(var, parentp, name) \
	ClaimsPath var = {(parentp), (name), (int) strlen(name), -1}

/* The most bytes of client text one message echoes in one place. */
#define CLAIMS_ECHO_MAX_BYTES 64

/*
 * Request text (a key, name or value) as a message echoes it: whole when
 * short, else cut on a character boundary (a cut inside one makes the
 * message invalid, and its conversion for the client fails with 22021)
 * and followed by "...".
 */
static char *
claims_echo(const char *s, int len)
{
	int			cut;

	if (len <= CLAIMS_ECHO_MAX_BYTES)
		return pnstrdup(s, len);
	cut = pg_mbcliplen(s, len, CLAIMS_ECHO_MAX_BYTES);
	return psprintf("%.*s...", cut, s);
}

/*
 * Append the textual form of a path ("$.create_records[2].bucket").
 */
static void
claims_path_append(StringInfo buf, const ClaimsPath *path)
{
	if (path == NULL)
		return;
	claims_path_append(buf, path->parent);
	if (path->parent == NULL)
		appendStringInfoString(buf, claims_echo(path->key, path->keylen));
	else if (path->key)
	{
		appendStringInfoChar(buf, '.');
		appendStringInfoString(buf, claims_echo(path->key, path->keylen));
	}
	else
		appendStringInfo(buf, "[%d]", path->index);
}

/* The path as a string, for messages. */
char *
claims_path_string(const ClaimsPath *path)
{
	StringInfoData buf;

	initStringInfo(&buf);
	claims_path_append(&buf, path);
	return buf.data;
}

/*
 * Raise 22023 naming the field at fault.
 */
void
claims_malformed(const ClaimsPath *path, const char *fmt,...)
{
	StringInfoData msg;

	initStringInfo(&msg);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&msg, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&msg, needed);
	}
	claims_stats_count(CLAIMS_STAT_MALFORMED);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid request at %s: %s", claims_path_string(path), msg.data)));
}

/*
 * Does a JSON member name spell this field, in snake_case or lowerCamelCase?
 */
bool
claims_key_matches(const char *key, int keylen, const char *snake)
{
	int			slen = strlen(snake);
	int			i = 0;
	int			j = 0;

	if (keylen == slen && memcmp(key, snake, slen) == 0)
		return true;
	while (j < slen)
	{
		char		c = snake[j];

		if (c == '_' && j + 1 < slen)
		{
			c = pg_ascii_toupper((unsigned char) snake[j + 1]);
			j += 2;
		}
		else
			j++;
		if (i >= keylen || key[i] != c)
			return false;
		i++;
	}
	return i == keylen;
}

/* A short name for a JSON value's kind, for messages. */
static const char *
claims_json_kind(const JsonbValue *v)
{
	switch (v->type)
	{
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvNull:
			return "null";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a value";
	}
}

/*
 * Read the members of a JSON object into the listed fields; any other member
 * is an error.
 */
static void
claims_read_object(const JsonbValue *obj, const ClaimsPath *path,
				   ClaimsField *fields, int nfields)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;

	if (obj->type != jbvBinary || !JsonContainerIsObject(obj->val.binary.data))
		claims_malformed(path, "expected an object, not %s", claims_json_kind(obj));

	it = JsonbIteratorInit(obj->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		const char *key;
		int			keylen;
		ClaimsField *f = NULL;

		if (tok != WJB_KEY)
			continue;
		key = v.val.string.val;
		keylen = v.val.string.len;
		for (int i = 0; i < nfields; i++)
			if (claims_key_matches(key, keylen, fields[i].name))
			{
				f = &fields[i];
				break;
			}

		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);

		if (f == NULL)
		{
			ClaimsPath	child = {path, key, keylen, -1};

			claims_malformed(&child, "unknown field");
		}
		if (f->present || f->given)
		{
			ClaimsPath	child = {path, key, keylen, -1};

			claims_malformed(&child, "field \"%s\" is given twice", f->name);
		}
		f->given = key;
		f->givenlen = keylen;
		if (v.type == jbvNull)
			continue;			/* proto3: null is the default value */
		f->present = true;
		f->value = v;
	}
}

/* Path of a field as the client spelled it. */
static ClaimsPath
claims_field_path(const ClaimsPath *parent, const ClaimsField *f)
{
	ClaimsPath	p = {parent, f->given ? f->given : f->name,
	f->given ? f->givenlen : (int) strlen(f->name), -1};

	return p;
}

/*
 * The elements of a JSON array (absent fields read as empty).
 */
static JsonbValue *
claims_read_array(const JsonbValue *v, const ClaimsPath *path, int *n)
{
	JsonbIterator *it;
	JsonbValue	elem;
	JsonbIteratorToken tok;
	JsonbValue *out;
	int			count = 0;

	if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
		claims_malformed(path, "expected an array, not %s", claims_json_kind(v));

	*n = JsonContainerSize(v->val.binary.data);
	out = palloc(sizeof(JsonbValue) * Max(*n, 1));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
		if (tok == WJB_ELEM)
			out[count++] = elem;
	*n = count;
	return out;
}

/*
 * Parse a decimal int64 ("-12", "42"); false when malformed or out of range.
 */
static bool
claims_parse_int64_text(const char *s, int len, int64 *out)
{
	bool		neg = false;
	uint64		acc = 0;
	int			i = 0;

	if (len > 0 && (s[0] == '-' || s[0] == '+'))
	{
		neg = (s[0] == '-');
		i++;
	}
	if (i >= len)
		return false;
	for (; i < len; i++)
	{
		if (s[i] < '0' || s[i] > '9')
			return false;
		if (acc > (PG_UINT64_MAX - (s[i] - '0')) / 10)
			return false;
		acc = acc * 10 + (s[i] - '0');
	}
	if (neg)
	{
		if (acc > (uint64) PG_INT64_MAX + 1)
			return false;
		*out = (acc == (uint64) PG_INT64_MAX + 1) ? PG_INT64_MIN : -(int64) acc;
	}
	else
	{
		if (acc > (uint64) PG_INT64_MAX)
			return false;
		*out = (int64) acc;
	}
	return true;
}

/*
 * A JSON number for a message: as numeric_out writes it when its decimal
 * exponent is small, else in scientific notation, so that an 8-byte
 * 1e100000 is never expanded to its hundred thousand digits.
 */
static char *
claims_echo_numeric(Numeric num)
{
	char	   *sci = numeric_out_sci(num, 15);
	char	   *e = strchr(sci, 'e');
	char	   *end;

	if (e == NULL)				/* NaN or infinity */
		return claims_echo(sci, strlen(sci));
	if (abs(atoi(e + 1)) < CLAIMS_ECHO_MAX_BYTES)
	{
		char	   *text = DatumGetCString(DirectFunctionCall1(numeric_out,
															   NumericGetDatum(num)));

		return claims_echo(text, strlen(text));
	}
	/* 1.500000000000000e+100000 -> 1.5e+100000 */
	end = e;
	while (end[-1] == '0')
		end--;
	if (end[-1] == '.')
		end--;
	memmove(end, e, strlen(e) + 1);
	return claims_echo(sci, strlen(sci));
}

/* Is an integral numeric within int64? */
static bool
claims_numeric_fits_int64(Datum whole)
{
	static Numeric min_int64 = NULL;
	static Numeric max_int64 = NULL;

	if (min_int64 == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		max_int64 = int64_to_numeric(PG_INT64_MAX);
		min_int64 = int64_to_numeric(PG_INT64_MIN);
		MemoryContextSwitchTo(old);
	}
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, whole, NumericGetDatum(min_int64))) >= 0 &&
		DatumGetInt32(DirectFunctionCall2(numeric_cmp, whole, NumericGetDatum(max_int64))) <= 0;
}

/*
 * An int64 given as a JSON number (integral: "300.0" is 300) or a decimal
 * string. The number is judged as a numeric, never expanded to text.
 */
static int64
claims_read_int64(const JsonbValue *v, const ClaimsPath *path)
{
	int64		result;

	if (v->type == jbvNumeric)
	{
		Datum		num = NumericGetDatum(v->val.numeric);
		Datum		whole;

		if (numeric_is_nan(v->val.numeric) || numeric_is_inf(v->val.numeric))
			claims_malformed(path, "expected an integer, not %s", claims_echo_numeric(v->val.numeric));
		whole = DirectFunctionCall2(numeric_trunc, num, Int32GetDatum(0));
		if (!DatumGetBool(DirectFunctionCall2(numeric_eq, num, whole)))
			claims_malformed(path, "expected an integer, not %s", claims_echo_numeric(v->val.numeric));
		if (!claims_numeric_fits_int64(whole))
			claims_malformed(path, "integer %s is out of range for int64", claims_echo_numeric(v->val.numeric));
		return DatumGetInt64(DirectFunctionCall1(numeric_int8, whole));
	}
	if (v->type == jbvString)
	{
		if (!claims_parse_int64_text(v->val.string.val, v->val.string.len, &result))
			claims_malformed(path, "expected a decimal int64, not \"%s\"",
							 claims_echo(v->val.string.val, v->val.string.len));
		return result;
	}
	claims_malformed(path, "expected an integer, not %s", claims_json_kind(v));
}

/*
 * An int32 (enum numbers, limits).
 */
static int32
claims_read_int32(const JsonbValue *v, const ClaimsPath *path)
{
	int64		n = claims_read_int64(v, path);

	if (n < PG_INT32_MIN || n > PG_INT32_MAX)
		claims_malformed(path, "integer " INT64_FORMAT " is out of range for int32", n);
	return (int32) n;
}

/*
 * A registered, specified enum value by name, alias or number.
 */
static int32
claims_read_enum(ClaimsRegistryKind kind, const JsonbValue *v, const ClaimsPath *path)
{
	const ClaimsTypeEntry *e;
	const char *label = claims_registry_kind_label(kind);

	if (v->type == jbvString)
	{
		const char *s = v->val.string.val;
		int			len = v->val.string.len;

		if (len == 11 && memcmp(s, "UNSPECIFIED", 11) == 0)
			claims_malformed(path, "%s must not be UNSPECIFIED", label);
		e = claims_type_by_name(kind, s, len);
		if (e == NULL)
			claims_malformed(path, "unknown %s \"%s\" (registered types are listed in %s)",
							 label, claims_echo(s, len), claims_registry_table(kind));
		return e->id;
	}
	if (v->type == jbvNumeric)
	{
		int32		id = claims_read_int32(v, path);

		if (id == 0)
			claims_malformed(path, "%s must not be UNSPECIFIED", label);
		e = claims_type_by_id(kind, id);
		if (e == NULL)
			claims_malformed(path, "unknown %s %d (registered types are listed in %s)",
							 label, id, claims_registry_table(kind));
		return e->id;
	}
	claims_malformed(path, "expected a %s name or number, not %s", label, claims_json_kind(v));
}

/* Value of one base64 character in either alphabet, or -1. */
static int
claims_b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+' || c == '-')
		return 62;
	if (c == '/' || c == '_')
		return 63;
	return -1;
}

/*
 * Decode base64 (standard or URL-safe, padding optional) into a bytea;
 * NULL when the text is not base64.
 */
static bytea *
claims_base64_decode(const char *s, int len)
{
	bytea	   *out;
	uint8	   *dst;
	uint32		acc = 0;
	int			bits = 0;
	int			n = 0;
	int			pad = 0;

	while (pad < 2 && len > 0 && s[len - 1] == '=')
	{
		len--;
		pad++;
	}
	if (pad > 0 && (len + pad) % 4 != 0)
		return NULL;
	if (len % 4 == 1)
		return NULL;

	out = palloc(VARHDRSZ + (len * 3) / 4 + 3);
	dst = (uint8 *) VARDATA(out);
	for (int i = 0; i < len; i++)
	{
		int			val = claims_b64_value(s[i]);

		if (val < 0)
			return NULL;
		acc = (acc << 6) | (uint32) val;
		bits += 6;
		if (bits >= 8)
		{
			bits -= 8;
			dst[n++] = (uint8) ((acc >> bits) & 0xFF);
		}
	}
	/* leftover bits must be zero for canonical input */
	if (bits > 0 && (acc & ((1u << bits) - 1)) != 0)
		return NULL;
	SET_VARSIZE(out, VARHDRSZ + n);
	return out;
}

/*
 * bytes as base64 text.
 */
static bytea *
claims_read_bytes(const JsonbValue *v, const ClaimsPath *path)
{
	bytea	   *b;

	if (v->type != jbvString)
		claims_malformed(path, "expected base64 bytes, not %s", claims_json_kind(v));
	b = claims_base64_decode(v->val.string.val, v->val.string.len);
	if (b == NULL)
		claims_malformed(path, "invalid base64");
	return b;
}

/*
 * A source id: base64 bytes, or (older int64 form) a JSON number stored as
 * 8 bytes big-endian as the real client encodes integer keys.
 */
static bytea *
claims_read_source_id(const JsonbValue *v, const ClaimsPath *path)
{
	bytea	   *b;

	if (v->type == jbvNumeric)
	{
		int64		n = claims_read_int64(v, path);
		uint64		u = (uint64) n;
		uint8	   *d;

		b = palloc(VARHDRSZ + 8);
		SET_VARSIZE(b, VARHDRSZ + 8);
		d = (uint8 *) VARDATA(b);
		for (int i = 7; i >= 0; i--)
		{
			d[i] = (uint8) (u & 0xFF);
			u >>= 8;
		}
	}
	else
		b = claims_read_bytes(v, path);

	if (VARSIZE_ANY_EXHDR(b) < 1 || VARSIZE_ANY_EXHDR(b) > CLAIMS_MAX_SOURCE_ID_BYTES)
		claims_malformed(path, "source id must be 1 to %d bytes, not %d",
						 CLAIMS_MAX_SOURCE_ID_BYTES, (int) VARSIZE_ANY_EXHDR(b));
	return b;
}

/* Value of one hex digit, or -1. */
static int
claims_hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * A UUID string in its canonical 8-4-4-4-12 hex form.
 */
static void
claims_read_uuid_text(const JsonbValue *v, const ClaimsPath *path, pg_uuid_t *out)
{
	const char *s;
	int			len;
	int			n = 0;

	if (v->type != jbvString)
		claims_malformed(path, "expected a UUID string, not %s", claims_json_kind(v));
	s = v->val.string.val;
	len = v->val.string.len;
	if (len != 36)
		claims_malformed(path, "invalid UUID \"%s\"", claims_echo(s, len));
	for (int i = 0; i < 36;)
	{
		int			hi,
					lo;

		if (i == 8 || i == 13 || i == 18 || i == 23)
		{
			if (s[i] != '-')
				claims_malformed(path, "invalid UUID \"%s\"", claims_echo(s, len));
			i++;
			continue;
		}
		hi = claims_hex_value(s[i]);
		lo = claims_hex_value(s[i + 1]);
		if (hi < 0 || lo < 0)
			claims_malformed(path, "invalid UUID \"%s\"", claims_echo(s, len));
		out->data[n++] = (uint8) ((hi << 4) | lo);
		i += 2;
	}
}

/*
 * A UUID: the bare string, or the types.v1.UUID message that proto3 JSON
 * writes, {"value": "..."}.
 */
static void
claims_read_uuid(const JsonbValue *v, const ClaimsPath *path, pg_uuid_t *out)
{
	ClaimsField f[] = {{"value"}};
	ClaimsPath	vp;

	if (v->type == jbvString)
	{
		claims_read_uuid_text(v, path, out);
		return;
	}
	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		claims_malformed(path, "expected a UUID string or {\"value\": UUID string}, not %s",
						 claims_json_kind(v));
	claims_read_object(v, path, f, lengthof(f));
	vp = claims_field_path(path, &f[0]);
	if (!f[0].present)
		claims_malformed(&vp, "a UUID is required");
	claims_read_uuid_text(&f[0].value, &vp, out);
}

/* Read exactly ndigits decimal digits at s[*pos]; -1 if not there. */
static int
claims_digits(const char *s, int len, int *pos, int ndigits)
{
	int			v = 0;

	for (int i = 0; i < ndigits; i++)
	{
		if (*pos >= len || s[*pos] < '0' || s[*pos] > '9')
			return -1;
		v = v * 10 + (s[*pos] - '0');
		(*pos)++;
	}
	return v;
}

/* Expect one character at s[*pos]. */
static bool
claims_expect(const char *s, int len, int *pos, char c1, char c2)
{
	if (*pos < len && (s[*pos] == c1 || s[*pos] == c2))
	{
		(*pos)++;
		return true;
	}
	return false;
}

/*
 * An RFC 3339 timestamp: 2026-01-02T03:04:05[.fraction](Z|+hh:mm|-hh:mm).
 */
static TimestampTz
claims_read_timestamp(const JsonbValue *v, const ClaimsPath *path)
{
	const char *s;
	int			len;
	int			pos = 0;
	struct pg_tm tm;
	fsec_t		fsec = 0;
	int			offset = 0;
	Timestamp	ts;

	if (v->type != jbvString)
		claims_malformed(path, "expected an RFC 3339 timestamp string, not %s", claims_json_kind(v));
	s = v->val.string.val;
	len = v->val.string.len;
	memset(&tm, 0, sizeof(tm));

	tm.tm_year = claims_digits(s, len, &pos, 4);
	if (tm.tm_year < 1 || !claims_expect(s, len, &pos, '-', '-') ||
		(tm.tm_mon = claims_digits(s, len, &pos, 2)) < 1 || tm.tm_mon > 12 ||
		!claims_expect(s, len, &pos, '-', '-') ||
		(tm.tm_mday = claims_digits(s, len, &pos, 2)) < 1 ||
		tm.tm_mday > day_tab[isleap(tm.tm_year)][tm.tm_mon - 1] ||
		!claims_expect(s, len, &pos, 'T', 't') ||
		(tm.tm_hour = claims_digits(s, len, &pos, 2)) < 0 || tm.tm_hour > 23 ||
		!claims_expect(s, len, &pos, ':', ':') ||
		(tm.tm_min = claims_digits(s, len, &pos, 2)) < 0 || tm.tm_min > 59 ||
		!claims_expect(s, len, &pos, ':', ':') ||
		(tm.tm_sec = claims_digits(s, len, &pos, 2)) < 0 || tm.tm_sec > 59)
		goto bad;

	if (pos < len && s[pos] == '.')
	{
		int			ndigits = 0;
		int			scale = 100000;

		pos++;
		while (pos < len && s[pos] >= '0' && s[pos] <= '9')
		{
			if (ndigits < 6)
			{
				fsec += (s[pos] - '0') * scale;
				scale /= 10;
			}
			ndigits++;
			pos++;
		}
		if (ndigits == 0 || ndigits > 9)
			goto bad;
	}

	if (claims_expect(s, len, &pos, 'Z', 'z'))
		offset = 0;
	else if (pos < len && (s[pos] == '+' || s[pos] == '-'))
	{
		int			sign = (s[pos] == '-') ? -1 : 1;
		int			oh,
					om;

		pos++;
		oh = claims_digits(s, len, &pos, 2);
		if (oh < 0 || oh > 23 || !claims_expect(s, len, &pos, ':', ':'))
			goto bad;
		om = claims_digits(s, len, &pos, 2);
		if (om < 0 || om > 59)
			goto bad;
		offset = sign * (oh * 3600 + om * 60);
	}
	else
		goto bad;
	if (pos != len)
		goto bad;

	if (tm2timestamp(&tm, fsec, NULL, &ts) != 0)
		goto bad;
	return (TimestampTz) (ts - (int64) offset * USECS_PER_SEC);

bad:
	claims_malformed(path, "invalid RFC 3339 timestamp \"%s\"", claims_echo(s, len));
}

/*
 * The canonical decimal text of an integer-valued claim ("42", "-7").
 */
static bool
claims_is_canonical_int64(const char *s, int len)
{
	int64		n;
	int			start = (len > 0 && s[0] == '-') ? 1 : 0;

	if (!claims_parse_int64_text(s, len, &n) || s[0] == '+')
		return false;
	if (len - start > 1 && s[start] == '0')
		return false;
	if (start == 1 && n == 0)
		return false;
	return true;
}

/*
 * Check a bucket value's length and, for integer-valued types, its form.
 */
static void
claims_check_value(int32 bucket_type, const char *value, int len, const ClaimsPath *path)
{
	int			nchars = pg_mbstrlen_with_len(value, len);
	const ClaimsTypeEntry *e;

	if (nchars < 1 || nchars > CLAIMS_MAX_VALUE_CHARS)
		claims_malformed(path, "value must be 1 to %d characters, not %d",
						 CLAIMS_MAX_VALUE_CHARS, nchars);
	e = claims_type_by_id(CLAIMS_BUCKET_TYPES, bucket_type);
	if (e && e->integer_valued && !claims_is_canonical_int64(value, len))
		claims_malformed(path, "%s values are decimal integers without leading zeros, not \"%s\"",
						 e->name, claims_echo(value, len));
}

/*
 * Bucket {type, value}.
 */
static void
claims_read_bucket(const JsonbValue *v, const ClaimsPath *path,
				   int32 *type, char **value, int *len)
{
	ClaimsField f[] = {{"type"}, {"value"}};

	claims_read_object(v, path, f, lengthof(f));
	{
		ClaimsPath	tp = claims_field_path(path, &f[0]);
		ClaimsPath	vp = claims_field_path(path, &f[1]);

		if (!f[0].present)
			claims_malformed(&tp, "bucket type is required");
		*type = claims_read_enum(CLAIMS_BUCKET_TYPES, &f[0].value, &tp);
		if (!f[1].present)
			claims_malformed(&vp, "bucket value is required");
		if (f[1].value.type != jbvString)
			claims_malformed(&vp, "expected a string, not %s", claims_json_kind(&f[1].value));
		*value = f[1].value.val.string.val;
		*len = f[1].value.val.string.len;
		claims_check_value(*type, *value, *len, &vp);
	}
}

/*
 * types.v1.Claim: exactly one field, named after a bucket type.
 */
static void
claims_read_claim(const JsonbValue *v, const ClaimsPath *path,
				  int32 *type, char **value, int *len)
{
	JsonbIterator *it;
	JsonbValue	k,
				val;
	JsonbIteratorToken tok;
	int			nfields = 0;

	if (v->type != jbvBinary || !JsonContainerIsObject(v->val.binary.data))
		claims_malformed(path, "expected an object, not %s", claims_json_kind(v));

	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		const ClaimsTypeEntry *e;
		ClaimsPath	fp;

		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &val, true);
		if (val.type == jbvNull)
			continue;			/* proto3: null is the default value */
		fp.parent = path;
		fp.key = k.val.string.val;
		fp.keylen = k.val.string.len;
		fp.index = -1;

		e = claims_bucket_type_by_field(k.val.string.val, k.val.string.len);
		if (e == NULL)
			claims_malformed(&fp, "unknown claim field (claim fields are listed in claim_bucket_types.claim_field)");
		if (++nfields > 1)
			claims_malformed(path, "a claim holds exactly one field");

		*type = e->id;
		if (e->integer_valued && (val.type == jbvNumeric || val.type == jbvString))
		{
			int64		n = claims_read_int64(&val, &fp);

			*value = psprintf(INT64_FORMAT, n);
			*len = strlen(*value);
		}
		else if (val.type == jbvString)
		{
			*value = val.val.string.val;
			*len = val.val.string.len;
		}
		else if (e->integer_valued)
			claims_malformed(&fp, "expected an integer, not %s", claims_json_kind(&val));
		else
			claims_malformed(&fp, "expected a string, not %s", claims_json_kind(&val));
		claims_check_value(*type, *value, *len, &fp);
	}
	if (nfields == 0)
		claims_malformed(path, "a claim holds exactly one field");
}

/*
 * A value named by bucket, claim or both (which must agree).
 */
static void
claims_read_named_value(ClaimsField *bucket, ClaimsField *claim, const ClaimsPath *path,
						int32 *type, char **value, int *len)
{
	if (bucket->present)
	{
		ClaimsPath	bp = claims_field_path(path, bucket);

		claims_read_bucket(&bucket->value, &bp, type, value, len);
	}
	if (claim->present)
	{
		ClaimsPath	cp = claims_field_path(path, claim);
		int32		ctype;
		char	   *cvalue;
		int			clen;

		claims_read_claim(&claim->value, &cp, &ctype, &cvalue, &clen);
		if (bucket->present && (ctype != *type || clen != *len || memcmp(cvalue, *value, clen) != 0))
			claims_malformed(&cp, "claim and bucket name different values");
		*type = ctype;
		*value = cvalue;
		*len = clen;
	}
	if (!bucket->present && !claim->present)
		claims_malformed(path, "a bucket or a claim is required");
}

/*
 * Subject {type, id}.
 */
static void
claims_read_subject(const JsonbValue *v, const ClaimsPath *path, ClaimsMetadata *m)
{
	ClaimsField f[] = {{"type"}, {"id"}};
	ClaimsPath	tp,
				ip;

	claims_read_object(v, path, f, lengthof(f));
	tp = claims_field_path(path, &f[0]);
	ip = claims_field_path(path, &f[1]);
	if (!f[0].present)
		claims_malformed(&tp, "subject type is required");
	m->subject_type = claims_read_enum(CLAIMS_SUBJECT_TYPES, &f[0].value, &tp);
	if (!f[1].present)
		claims_malformed(&ip, "subject id is required");
	m->subject_id = claims_read_int64(&f[1].value, &ip);
	if (m->subject_id == 0)
		claims_malformed(&ip, "subject id is required (0 is the unset value)");
	m->has_subject = true;
}

/*
 * Source {type, rails_primary_key_id}.
 */
static void
claims_read_source(const JsonbValue *v, const ClaimsPath *path, ClaimsMetadata *m)
{
	ClaimsField f[] = {{"type"}, {"rails_primary_key_id"}};
	ClaimsPath	tp,
				ip;

	claims_read_object(v, path, f, lengthof(f));
	tp = claims_field_path(path, &f[0]);
	ip = claims_field_path(path, &f[1]);
	if (!f[0].present)
		claims_malformed(&tp, "source type is required");
	m->source_type = claims_read_enum(CLAIMS_SOURCE_TYPES, &f[0].value, &tp);
	if (!f[1].present)
		claims_malformed(&ip, "source id is required");
	m->source_id = claims_read_source_id(&f[1].value, &ip);
	m->has_source = true;
}

/*
 * Metadata {bucket, subject, source, user_data, claim}. Creates need the
 * full metadata; destroys need only the value (anything else given is
 * still checked).
 */
static void
claims_read_metadata(const JsonbValue *v, const ClaimsPath *path, ClaimsMetadata *m, bool is_create)
{
	ClaimsField f[] = {{"bucket"}, {"subject"}, {"source"}, {"user_data"}, {"claim"}};

	memset(m, 0, sizeof(*m));
	claims_read_object(v, path, f, lengthof(f));
	claims_read_named_value(&f[0], &f[4], path, &m->bucket_type, &m->bucket_value, &m->bucket_value_len);

	if (f[1].present)
	{
		ClaimsPath	sp = claims_field_path(path, &f[1]);

		claims_read_subject(&f[1].value, &sp, m);
	}
	else if (is_create)
	{
		ClaimsPath	sp = claims_field_path(path, &f[1]);

		claims_malformed(&sp, "subject is required");
	}

	if (f[2].present)
	{
		ClaimsPath	sp = claims_field_path(path, &f[2]);

		claims_read_source(&f[2].value, &sp, m);
	}
	else if (is_create)
	{
		ClaimsPath	sp = claims_field_path(path, &f[2]);

		claims_malformed(&sp, "source is required");
	}

	if (f[3].present)
	{
		ClaimsPath	up = claims_field_path(path, &f[3]);

		if (f[3].value.type != jbvBinary || !JsonContainerIsObject(f[3].value.val.binary.data))
			claims_malformed(&up, "expected an object (google.protobuf.Any), not %s",
							 claims_json_kind(&f[3].value));
		m->user_data = JsonbValueToJsonb(&f[3].value);
	}
}

/*
 * SHA-256 of a bucket value: the key of the claims table. One OpenSSL
 * digest context and one fetched algorithm serve the whole backend (the
 * server's own sha256() sets both up on every call).
 */
void
claims_digest(const char *value, int len, uint8 *digest)
{
	static EVP_MD_CTX *ctx = NULL;
	static const EVP_MD *md = NULL;

	if (ctx == NULL)
	{
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
		md = EVP_MD_fetch(NULL, "SHA256", NULL);
#else
		md = EVP_sha256();
#endif
		ctx = EVP_MD_CTX_new();
		if (md == NULL || ctx == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("claims: could not set up SHA-256")));
	}
	if (EVP_DigestInit_ex(ctx, md, NULL) != 1 ||
		EVP_DigestUpdate(ctx, value, len) != 1 ||
		EVP_DigestFinal_ex(ctx, digest, NULL) != 1)
		elog(ERROR, "claims: could not compute SHA-256");
}

/* Order metadata by (bucket_type, digest), then position. */
static int
claims_metadata_cmp(const void *a, const void *b)
{
	const ClaimsMetadata *x = *(const ClaimsMetadata *const *) a;
	const ClaimsMetadata *y = *(const ClaimsMetadata *const *) b;
	int			c;

	if (x->bucket_type != y->bucket_type)
		return x->bucket_type < y->bucket_type ? -1 : 1;
	c = memcmp(x->digest, y->digest, CLAIMS_DIGEST_LEN);
	if (c != 0)
		return c;
	return x->list_index - y->list_index;
}

/*
 * Read one list of records, digest each value and refuse a value given
 * twice in the list.
 */
static ClaimsMetadata *
claims_read_record_list(ClaimsField *field, const ClaimsPath *root, bool is_create, int *n)
{
	ClaimsPath	lp = claims_field_path(root, field);
	JsonbValue *elems;
	ClaimsMetadata *list;
	ClaimsMetadata **sorted;

	*n = 0;
	if (!field->present)
		return NULL;
	elems = claims_read_array(&field->value, &lp, n);
	if (*n > claims_max_batch_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("batch of %d records exceeds claims.max_batch_size (%d)",
						*n, claims_max_batch_size),
				 errhint("Split the changes into several leases.")));

	list = palloc(sizeof(ClaimsMetadata) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		ClaimsPath	ep = {&lp, NULL, 0, i};
		ClaimsMetadata *m = &list[i];

		claims_read_metadata(&elems[i], &ep, m, is_create);
		m->list_index = i;
		m->in_create_list = is_create;
		claims_digest(m->bucket_value, m->bucket_value_len, m->digest);
	}

	sorted = palloc(sizeof(ClaimsMetadata *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		sorted[i] = &list[i];
	qsort(sorted, *n, sizeof(ClaimsMetadata *), claims_metadata_cmp);
	for (int i = 1; i < *n; i++)
		if (sorted[i]->bucket_type == sorted[i - 1]->bucket_type &&
			memcmp(sorted[i]->digest, sorted[i - 1]->digest, CLAIMS_DIGEST_LEN) == 0)
		{
			ClaimsPath	ep = {&lp, NULL, 0, Max(sorted[i]->list_index, sorted[i - 1]->list_index)};

			claims_malformed(&ep, "the same value is already at index %d of this list",
							 Min(sorted[i]->list_index, sorted[i - 1]->list_index));
		}
	pfree(sorted);
	return list;
}

/* The root of a request: must be a JSON object. */
static JsonbValue
claims_request_root(Jsonb *request, const ClaimsPath *root)
{
	JsonbValue	v;

	if (!JB_ROOT_IS_OBJECT(request))
		claims_malformed(root, "the request must be a JSON object");
	v.type = jbvBinary;
	v.val.binary.data = &request->root;
	v.val.binary.len = VARSIZE(request) - VARHDRSZ;
	return v;
}

/* A required cell_id, which the caller must be allowed to act for. */
static int64
claims_read_cell_id(ClaimsField *f, const ClaimsPath *root, bool for_new_lease)
{
	ClaimsPath	p = claims_field_path(root, f);
	int64		cell_id;

	if (!f->present)
		claims_malformed(&p, "cell_id is required");
	cell_id = claims_read_int64(&f->value, &p);
	if (cell_id <= 0)
		claims_malformed(&p, "must be greater than 0, not " INT64_FORMAT, cell_id);
	claims_authorize_cell(cell_id, for_new_lease);
	return cell_id;
}

/*
 * BeginUpdateRequest {cell_id, create_records, destroy_records, lease_uuid}.
 */
void
claims_parse_begin(Jsonb *request, ClaimsBeginRequest *out)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);
	ClaimsField f[] = {{"cell_id"}, {"create_records"}, {"destroy_records"}, {"lease_uuid"}};
	int			total;

	memset(out, 0, sizeof(*out));
	claims_read_object(&rv, &root, f, lengthof(f));
	out->cell_id = claims_read_cell_id(&f[0], &root, true);

	if (f[3].present)
	{
		ClaimsPath	p = claims_field_path(&root, &f[3]);

		claims_read_uuid(&f[3].value, &p, &out->lease_uuid);
		out->has_lease_uuid = true;
	}

	/* Refuse oversized batches before reading their records. */
	total = 0;
	for (int i = 1; i <= 2; i++)
		if (f[i].present && f[i].value.type == jbvBinary &&
			JsonContainerIsArray(f[i].value.val.binary.data))
			total += JsonContainerSize(f[i].value.val.binary.data);
	if (total > claims_max_batch_size)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("batch of %d records exceeds claims.max_batch_size (%d)",
						total, claims_max_batch_size),
				 errhint("Split the changes into several leases.")));

	out->creates = claims_read_record_list(&f[1], &root, true, &out->ncreates);
	out->destroys = claims_read_record_list(&f[2], &root, false, &out->ndestroys);

	if (out->ncreates + out->ndestroys == 0)
		claims_malformed(&root, "at least one record is required in create_records or destroy_records");
}

/*
 * GetRecordRequest {bucket, claim}.
 */
void
claims_parse_get_record(Jsonb *request, ClaimsBucketRef *out)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);
	ClaimsField f[] = {{"bucket"}, {"claim"}};

	claims_read_object(&rv, &root, f, lengthof(f));
	claims_read_named_value(&f[0], &f[1], &root, &out->bucket_type, &out->value, &out->value_len);
	claims_digest(out->value, out->value_len, out->digest);
}

/*
 * A page size: 0 or absent means the default, larger than the maximum is
 * coerced to it, negative is an error (AIP-158).
 */
static int
claims_read_limit(ClaimsField *f, const ClaimsPath *root, int dflt, int max)
{
	ClaimsPath	p = claims_field_path(root, f);
	int32		limit;

	if (!f->present)
		return dflt;
	limit = claims_read_int32(&f->value, &p);
	if (limit < 0)
		claims_malformed(&p, "limit must not be negative");
	if (limit == 0)
		return dflt;
	return Min(limit, max);
}

/*
 * ListLeasesRequest {cell_id, next, limit, created_after}. The token is the
 * (created_at, uuid) of the last lease returned, as base64; it is accepted
 * bare or wrapped as a google.protobuf.Any holding BytesValue.
 */
void
claims_parse_list_leases(Jsonb *request, ClaimsListLeasesRequest *out)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);
	ClaimsField f[] = {{"cell_id"}, {"next"}, {"limit"}, {"created_after"}};

	memset(out, 0, sizeof(*out));
	claims_read_object(&rv, &root, f, lengthof(f));
	out->cell_id = claims_read_cell_id(&f[0], &root, false);
	out->limit = claims_read_limit(&f[2], &root, CLAIMS_LEASES_DEFAULT_LIMIT, CLAIMS_LEASES_MAX_LIMIT);
	out->created_after = DT_NOBEGIN;
	if (f[3].present)
	{
		ClaimsPath	p = claims_field_path(&root, &f[3]);

		out->created_after = claims_read_timestamp(&f[3].value, &p);
	}
	if (f[1].present)
	{
		ClaimsPath	p = claims_field_path(&root, &f[1]);
		JsonbValue	token = f[1].value;
		bytea	   *raw;
		uint8	   *d;
		uint64		ts = 0;

		if (token.type == jbvBinary)
		{
			ClaimsField af[] = {{"@type"}, {"value"}};

			claims_read_object(&token, &p, af, lengthof(af));
			if (!af[1].present)
				claims_malformed(&p, "not a token returned by claims_list_leases");
			token = af[1].value;
		}
		if (token.type != jbvString)
			claims_malformed(&p, "not a token returned by claims_list_leases");
		raw = claims_base64_decode(token.val.string.val, token.val.string.len);
		if (raw == NULL || VARSIZE_ANY_EXHDR(raw) != 25 || ((uint8 *) VARDATA(raw))[0] != 1)
			claims_malformed(&p, "not a token returned by claims_list_leases");
		d = (uint8 *) VARDATA(raw);
		for (int i = 1; i <= 8; i++)
			ts = (ts << 8) | d[i];
		out->cursor_created_at = (TimestampTz) ts;
		memcpy(out->cursor_uuid.data, d + 9, UUID_LEN);
		out->has_cursor = true;
	}
}

/*
 * One element of claim_types (types.v1.ClaimType): its proto3 JSON name,
 * CLAIM_TYPE_ followed by a bucket type's claim field in upper case
 * (CLAIM_TYPE_USER_ID), or, as before, a bucket type's name, alias or
 * number (the two enums share their numbers).
 */
static int32
claims_read_claim_type(const JsonbValue *v, const ClaimsPath *path)
{
	static const char prefix[] = "CLAIM_TYPE_";
	int			plen = sizeof(prefix) - 1;

	if (v->type == jbvString && v->val.string.len > plen &&
		memcmp(v->val.string.val, prefix, plen) == 0)
	{
		const char *tail = v->val.string.val + plen;
		int			tlen = v->val.string.len - plen;
		const ClaimsTypeEntry *e;

		if (tlen == 11 && memcmp(tail, "UNSPECIFIED", 11) == 0)
			claims_malformed(path, "claim type must not be CLAIM_TYPE_UNSPECIFIED");
		e = claims_bucket_type_by_claim_type(tail, tlen);
		if (e != NULL)
			return e->id;
		if (claims_type_by_name(CLAIMS_BUCKET_TYPES, v->val.string.val, v->val.string.len) == NULL)
			claims_malformed(path, "unknown claim type \"%s\" (a claim type is CLAIM_TYPE_ and a claim_field of claim_bucket_types in upper case)",
							 claims_echo(v->val.string.val, v->val.string.len));
	}
	return claims_read_enum(CLAIMS_BUCKET_TYPES, v, path);
}

/*
 * ListRecordsRequest {cell_id, source_type, bucket_types, source_id_gt,
 * source_id_lte, claim_types, limit}.
 */
void
claims_parse_list_records(Jsonb *request, ClaimsListRecordsRequest *out)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);
	ClaimsField f[] = {{"cell_id"}, {"source_type"}, {"bucket_types"}, {"source_id_gt"},
	{"source_id_lte"}, {"claim_types"}, {"limit"}};
	ClaimsPath	sp;

	memset(out, 0, sizeof(*out));
	claims_read_object(&rv, &root, f, lengthof(f));
	out->cell_id = claims_read_cell_id(&f[0], &root, false);

	sp = claims_field_path(&root, &f[1]);
	if (!f[1].present)
		claims_malformed(&sp, "source_type is required");
	out->source_type = claims_read_enum(CLAIMS_SOURCE_TYPES, &f[1].value, &sp);

	for (int which = 2; which <= 5; which += 3)
	{
		ClaimsPath	lp = claims_field_path(&root, &f[which]);
		JsonbValue *elems;
		int			n;

		if (!f[which].present)
			continue;
		elems = claims_read_array(&f[which].value, &lp, &n);
		out->types = out->types
			? repalloc(out->types, sizeof(int32) * (out->ntypes + n + 1))
			: palloc(sizeof(int32) * (n + 1));
		for (int i = 0; i < n; i++)
		{
			ClaimsPath	ep = {&lp, NULL, 0, i};

			out->types[out->ntypes++] = which == 5
				? claims_read_claim_type(&elems[i], &ep)
				: claims_read_enum(CLAIMS_BUCKET_TYPES, &elems[i], &ep);
		}
	}

	out->source_id_gt = palloc(VARHDRSZ);
	SET_VARSIZE(out->source_id_gt, VARHDRSZ);
	if (f[3].present)
	{
		ClaimsPath	p = claims_field_path(&root, &f[3]);

		out->source_id_gt = claims_read_bytes(&f[3].value, &p);
		if (VARSIZE_ANY_EXHDR(out->source_id_gt) > CLAIMS_MAX_SOURCE_ID_BYTES)
			claims_malformed(&p, "source id must be at most %d bytes", CLAIMS_MAX_SOURCE_ID_BYTES);
	}
	if (f[4].present)
	{
		ClaimsPath	p = claims_field_path(&root, &f[4]);

		out->source_id_lte = claims_read_bytes(&f[4].value, &p);
		if (VARSIZE_ANY_EXHDR(out->source_id_lte) > CLAIMS_MAX_SOURCE_ID_BYTES)
			claims_malformed(&p, "source id must be at most %d bytes", CLAIMS_MAX_SOURCE_ID_BYTES);
		if (VARSIZE_ANY_EXHDR(out->source_id_lte) == 0)
			out->source_id_lte = NULL;	/* proto3: empty bytes is unset */
	}
	out->limit = claims_read_limit(&f[6], &root, CLAIMS_RECORDS_DEFAULT_LIMIT, CLAIMS_RECORDS_MAX_LIMIT);
}

/*
 * CommitUpdateRequest and RollbackUpdateRequest {cell_id, lease_uuid}: both
 * required; the caller must be allowed to act for the cell.
 */
void
claims_parse_finish(Jsonb *request, int64 *cell_id, pg_uuid_t *lease_uuid)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);
	ClaimsField f[] = {{"cell_id"}, {"lease_uuid"}};
	ClaimsPath	up;

	claims_read_object(&rv, &root, f, lengthof(f));
	*cell_id = claims_read_cell_id(&f[0], &root, false);
	up = claims_field_path(&root, &f[1]);
	if (!f[1].present)
		claims_malformed(&up, "lease_uuid is required");
	claims_read_uuid(&f[1].value, &up, lease_uuid);
}

/*
 * GetCellsRequest {}: no fields.
 */
void
claims_parse_get_cells(Jsonb *request)
{
	ClaimsPath	root = {NULL, "$", 1, -1};
	JsonbValue	rv = claims_request_root(request, &root);

	claims_read_object(&rv, &root, NULL, 0);
}
