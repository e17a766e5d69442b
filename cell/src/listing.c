/*-------------------------------------------------------------------------
 *
 * listing.c
 *	  Reading the store's listing pages (claims_list_records, as the text
 *	  the store sent) for verify(): one pass of a strict JSON reader over
 *	  the text, which copies out only the members the comparison reads and
 *	  decodes escapes only in those. The text must be JSON (else 08P01), a
 *	  page an object; its "records" elements that are objects are records.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "common/base64.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"

/* A string of the text: its bytes between the quotes, escapes undecoded. */
typedef struct ListingString
{
	const char *s;
	int			len;
	bool		escaped;		/* holds a backslash escape */
} ListingString;

/* The reader: the text and the position in it. */
typedef struct ListingReader
{
	const char *start;
	const char *p;
	const char *end;
	bool		sid_only;		/* only the records' source ids are wanted */
} ListingReader;

/* A byte that continues a word or number (as PostgreSQL's JSON lexer). */
#define LISTING_ALNUM(c) \
	(((c) >= 'a' && (c) <= 'z') || ((c) >= 'A' && (c) <= 'Z') || \
	 ((c) >= '0' && (c) <= '9') || (c) == '_' || IS_HIGHBIT_SET(c))

#define LISTING_DIGIT(c) ((c) >= '0' && (c) <= '9')

static void listing_error(ListingReader *r, const char *expected) pg_attribute_noreturn();

/* Fail: the text is not JSON where the reader stands. */
static void
listing_error(ListingReader *r, const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROTOCOL_VIOLATION),
			 errmsg("the claims store sent a listing of records that is not valid JSON"),
			 errdetail("Expected %s at byte %d.", expected, (int) (r->p - r->start))));
}

/* Skip JSON whitespace. */
static inline void
listing_skip_ws(ListingReader *r)
{
	while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
		r->p++;
}

/* The next byte after whitespace, or '\0' at the end of the text. */
static inline char
listing_peek(ListingReader *r)
{
	listing_skip_ws(r);
	return r->p < r->end ? *r->p : '\0';
}

/* Consume c if it comes next. */
static inline bool
listing_accept(ListingReader *r, char c)
{
	if (listing_peek(r) != c)
		return false;
	r->p++;
	return true;
}

/* Consume c, which must come next. */
static inline void
listing_expect(ListingReader *r, char c, const char *expected)
{
	if (!listing_accept(r, c))
		listing_error(r, expected);
}

/* The code unit of the four hex digits at q (before end), or -1. */
static int
listing_hex4(const char *q, const char *end)
{
	int			v = 0;

	if (end - q < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		char		c = q[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v += c - '0';
		else if (c >= 'a' && c <= 'f')
			v += c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			v += c - 'A' + 10;
		else
			return -1;
	}
	return v;
}

/*
 * Read a string, validating its escapes as PostgreSQL's JSON lexer does
 * (a high surrogate followed by a low one, no \u0000), without decoding.
 */
static void
listing_scan_string(ListingReader *r, ListingString *out)
{
	const char *q;

	if (listing_peek(r) != '"')
		listing_error(r, "a string");
	q = ++r->p;
	out->s = q;
	out->escaped = false;
	for (;;)
	{
		int			u;

		while (q < r->end && *q != '"' && *q != '\\' && (unsigned char) *q >= 0x20)
			q++;
		r->p = q;
		if (q >= r->end)
			listing_error(r, "the end of a string");
		if (*q == '"')
			break;
		if (*q != '\\')
			listing_error(r, "an escaped control character");
		out->escaped = true;
		if (q + 1 >= r->end)
			listing_error(r, "an escape");
		if (strchr("\"\\/bfnrt", q[1]) != NULL && q[1] != '\0')
		{
			q += 2;
			continue;
		}
		if (q[1] != 'u' || (u = listing_hex4(q + 2, r->end)) < 0)
			listing_error(r, "an escape");
		if (is_utf16_surrogate_first(u))
		{
			if (r->end - q < 12 || q[6] != '\\' || q[7] != 'u' ||
				!is_utf16_surrogate_second(listing_hex4(q + 8, r->end)))
				listing_error(r, "a Unicode low surrogate after the high one");
			q += 12;
		}
		else if (is_utf16_surrogate_second(u))
			listing_error(r, "a Unicode high surrogate before the low one");
		else if (u == 0)
			listing_error(r, "a Unicode escape other than \\u0000");
		else
			q += 6;
	}
	out->len = q - out->s;
	r->p = q + 1;
}

/* A string's value, decoded (in the database's encoding), palloc'd. */
static char *
listing_string_value(const ListingString *s)
{
	StringInfoData buf;
	const char *q = s->s;
	const char *end = s->s + s->len;

	if (!s->escaped)
		return pnstrdup(s->s, s->len);
	initStringInfo(&buf);
	while (q < end)
	{
		const char *run = q;
		char		cbuf[MAX_UNICODE_EQUIVALENT_STRING + 1];
		pg_wchar	ch;

		while (q < end && *q != '\\')
			q++;
		appendBinaryStringInfo(&buf, run, q - run);
		if (q >= end)
			break;
		/* validated by listing_scan_string() */
		switch (q[1])
		{
			case 'b':
				appendStringInfoChar(&buf, '\b');
				break;
			case 'f':
				appendStringInfoChar(&buf, '\f');
				break;
			case 'n':
				appendStringInfoChar(&buf, '\n');
				break;
			case 'r':
				appendStringInfoChar(&buf, '\r');
				break;
			case 't':
				appendStringInfoChar(&buf, '\t');
				break;
			case 'u':
				ch = listing_hex4(q + 2, end);
				if (is_utf16_surrogate_first(ch))
				{
					ch = surrogate_pair_to_codepoint(ch, listing_hex4(q + 8, end));
					q += 6;
				}
				pg_unicode_to_server(ch, (unsigned char *) cbuf);
				appendStringInfoString(&buf, cbuf);
				q += 4;
				break;
			default:
				appendStringInfoChar(&buf, q[1]);
				break;
		}
		q += 2;
	}
	return buf.data;
}

/* Is the member name s the name? A name with escapes is decoded once. */
static bool
listing_string_is(ListingString *s, const char *name)
{
	if (s->escaped)
	{
		s->s = listing_string_value(s);
		s->len = strlen(s->s);
		s->escaped = false;
	}
	return s->len == strlen(name) && memcmp(s->s, name, s->len) == 0;
}

/*
 * Step to an object's next member (first: the reader stands after its
 * "{"): true with its name in *key and the reader at its value, false
 * once the object has closed.
 */
static bool
listing_next_member(ListingReader *r, bool *first, ListingString *key)
{
	if (*first)
	{
		*first = false;
		if (listing_accept(r, '}'))
			return false;
	}
	else if (!listing_accept(r, ','))
	{
		listing_expect(r, '}', "\",\" or \"}\"");
		return false;
	}
	listing_scan_string(r, key);
	listing_expect(r, ':', "\":\"");
	return true;
}

/* The same for an array's next element (first: after its "["). */
static bool
listing_next_element(ListingReader *r, bool *first)
{
	if (*first)
	{
		*first = false;
		return !listing_accept(r, ']');
	}
	if (listing_accept(r, ','))
		return true;
	listing_expect(r, ']', "\",\" or \"]\"");
	return false;
}

/* Read the word w (true, false, null), which must not run on. */
static bool
listing_accept_word(ListingReader *r, const char *w)
{
	int			len = strlen(w);

	if (r->end - r->p < len || memcmp(r->p, w, len) != 0 ||
		(r->end - r->p > len && LISTING_ALNUM(r->p[len])))
		return false;
	r->p += len;
	return true;
}

/* Read a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static void
listing_scan_number(ListingReader *r)
{
	const char *q = r->p;
	const char *end = r->end;

	if (q < end && *q == '-')
		q++;
	if (q < end && *q == '0')
		q++;
	else if (q < end && LISTING_DIGIT(*q))
		while (q < end && LISTING_DIGIT(*q))
			q++;
	else
		listing_error(r, "a JSON value");
	if (q < end && *q == '.')
	{
		if (++q >= end || !LISTING_DIGIT(*q))
			listing_error(r, "digits after the decimal point");
		while (q < end && LISTING_DIGIT(*q))
			q++;
	}
	if (q < end && (*q == 'e' || *q == 'E'))
	{
		q++;
		if (q < end && (*q == '+' || *q == '-'))
			q++;
		if (q >= end || !LISTING_DIGIT(*q))
			listing_error(r, "digits in the exponent");
		while (q < end && LISTING_DIGIT(*q))
			q++;
	}
	if (q < end && LISTING_ALNUM(*q))
		listing_error(r, "the end of a number");
	r->p = q;
}

/* Skip one value of any kind, validating it. */
static void
listing_skip_value(ListingReader *r)
{
	ListingString s;
	bool		first = true;

	switch (listing_peek(r))
	{
		case '{':
			check_stack_depth();
			r->p++;
			while (listing_next_member(r, &first, &s))
				listing_skip_value(r);
			return;
		case '[':
			check_stack_depth();
			r->p++;
			while (listing_next_element(r, &first))
				listing_skip_value(r);
			return;
		case '"':
			listing_scan_string(r, &s);
			return;
		case 't':
		case 'f':
		case 'n':
			if (listing_accept_word(r, "true") || listing_accept_word(r, "false") ||
				listing_accept_word(r, "null"))
				return;
			listing_error(r, "a JSON value");
		default:
			listing_scan_number(r);
	}
}

/* Enter an object the reader stands at; any other value is skipped. */
static bool
listing_enter_object(ListingReader *r)
{
	if (listing_peek(r) == '{')
	{
		r->p++;
		return true;
	}
	listing_skip_value(r);
	return false;
}

/*
 * A member the comparison reads, into *into: a string decoded, a number,
 * true or false as its text, NULL for null; an object or array is skipped
 * and leaves *into as it was (the store writes these members as scalars).
 */
static void
listing_read_scalar(ListingReader *r, char **into)
{
	const char *at;
	ListingString s;

	switch (listing_peek(r))
	{
		case '"':
			listing_scan_string(r, &s);
			*into = listing_string_value(&s);
			return;
		case '{':
		case '[':
			listing_skip_value(r);
			return;
		case 'n':
			if (!listing_accept_word(r, "null"))
				listing_error(r, "a JSON value");
			*into = NULL;
			return;
		default:
			at = r->p;
			listing_skip_value(r);
			*into = pnstrdup(at, r->p - at);
	}
}

/* The members "type" and a second one (value, id, ...) of an object. */
static void
listing_read_pair(ListingReader *r, char **type, const char *name, char **value)
{
	ListingString key;
	bool		first = true;

	if (!listing_enter_object(r))
		return;
	while (listing_next_member(r, &first, &key))
	{
		if (listing_string_is(&key, "type"))
			listing_read_scalar(r, type);
		else if (listing_string_is(&key, name))
			listing_read_scalar(r, value);
		else
			listing_skip_value(r);
	}
}

/* A record's "metadata": its bucket, subject and source. */
static void
listing_read_metadata(ListingReader *r, VerifyRecord *rec)
{
	ListingString key;
	bool		first = true;

	if (!listing_enter_object(r))
		return;
	while (listing_next_member(r, &first, &key))
	{
		if (r->sid_only && !listing_string_is(&key, "source"))
			listing_skip_value(r);
		else if (listing_string_is(&key, "bucket"))
			listing_read_pair(r, &rec->bucket_type, "value", &rec->value);
		else if (listing_string_is(&key, "subject"))
			listing_read_pair(r, &rec->subject_type, "id", &rec->subject_id);
		else if (listing_string_is(&key, "source"))
			listing_read_pair(r, &rec->source_type, "rails_primary_key_id", &rec->sid);
		else
			listing_skip_value(r);
	}
}

/*
 * One record (the reader stands at its "{"): the members the comparison
 * reads, its source id as the store wrote it (base64), and its text.
 */
static void
listing_read_record(ListingReader *r, VerifyRecord *rec)
{
	ListingString key;
	bool		first = true;

	memset(rec, 0, sizeof(VerifyRecord));
	rec->text = r->p;
	r->p++;
	while (listing_next_member(r, &first, &key))
	{
		if (listing_string_is(&key, "metadata"))
			listing_read_metadata(r, rec);
		else if (r->sid_only)
			listing_skip_value(r);
		else if (listing_string_is(&key, "status"))
			listing_read_scalar(r, &rec->status);
		else if (listing_string_is(&key, "updated_at"))
			listing_read_scalar(r, &rec->updated_at);
		else
			listing_skip_value(r);
	}
	rec->textlen = r->p - rec->text;
}

/* Add a record to out, growing it; the new record is returned. */
static VerifyRecord *
listing_new_record(VerifyRecords *out)
{
	if (out->n >= out->cap)
	{
		out->cap = Max(64, out->cap * 2);
		out->recs = out->recs ? repalloc(out->recs, sizeof(VerifyRecord) * out->cap)
			: palloc(sizeof(VerifyRecord) * out->cap);
	}
	return &out->recs[out->n++];
}

/*
 * Read a listing page of len bytes: its records appended to out (NULL: not
 * kept; the text must outlive them), whether it says it is truncated, and
 * its last record's source id as the store wrote it (NULL if none).
 */
void
listing_read_page(const char *text, int len, VerifyRecords *out,
				  bool *truncated, char **last_sid)
{
	ListingReader r;
	ListingString key;
	VerifyRecord scratch;
	bool		first = true;

	r.start = r.p = text;
	r.end = text + len;
	r.sid_only = (out == NULL);
	*truncated = false;
	*last_sid = NULL;
	listing_expect(&r, '{', "a listing page, an object");
	while (listing_next_member(&r, &first, &key))
	{
		if (listing_string_is(&key, "records") && listing_peek(&r) == '[')
		{
			bool		first_record = true;

			r.p++;
			while (listing_next_element(&r, &first_record))
			{
				VerifyRecord *rec;

				if (listing_peek(&r) != '{')
				{
					listing_skip_value(&r);
					continue;
				}
				rec = out ? listing_new_record(out) : &scratch;
				listing_read_record(&r, rec);
				*last_sid = rec->sid;
			}
		}
		else if (listing_string_is(&key, "truncated"))
		{
			listing_skip_ws(&r);
			*truncated = listing_accept_word(&r, "true");
			if (!*truncated)
				listing_skip_value(&r);
		}
		else
			listing_skip_value(&r);
	}
	if (listing_peek(&r) != '\0' || r.p != r.end)
		listing_error(&r, "the end of the listing");
}
