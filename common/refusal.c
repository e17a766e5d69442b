/*-------------------------------------------------------------------------
 *
 * refusal.c
 *	  The refusal contract (refusal.h): labels, the kinds, and the DETAIL
 *	  line naming the values at fault, written by the store and parsed by
 *	  the cell with the same code.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "refusal.h"

const ClaimsRefusalKindInfo claims_refusal_kinds[CLAIMS_REFUSAL_NKINDS] = {
	[CLAIMS_REFUSAL_NONE] = {"", NULL},
	[CLAIMS_REFUSAL_RESTORING] = {"restoring", NULL},
	[CLAIMS_REFUSAL_NOT_CLAIMED] = {"not_claimed", CLAIMS_SQLSTATE_NOT_FOUND},
	[CLAIMS_REFUSAL_OTHER_CELL] = {"other_cell", CLAIMS_SQLSTATE_NOT_PERMITTED},
	[CLAIMS_REFUSAL_LEASE_FINISHED] = {"lease_finished", NULL},
	[CLAIMS_REFUSAL_MOVE_TARGET] = {"move_target", NULL},
	[CLAIMS_REFUSAL_TAKEN] = {"taken", CLAIMS_SQLSTATE_TAKEN},
	[CLAIMS_REFUSAL_LEASED] = {"leased", CLAIMS_SQLSTATE_LEASED},
};

/* "{TYPE=value}" of a value of len bytes. */
char *
claims_label(const char *type, const char *value, int len)
{
	return psprintf(CLAIMS_LABEL_FORMAT, type, len, value);
}

/* Start the line: a newline after the human text, then the marker. */
void
claims_refusal_line_start(StringInfo detail)
{
	appendStringInfoChar(detail, '\n');
	appendStringInfoString(detail, CLAIMS_REFUSAL_MARKER);
}

/* Add one fault to the line, escaping the value as the grammar says. */
void
claims_refusal_line_add(StringInfo detail, ClaimsRefusalKind kind, const char *subject,
						const char *value, int len)
{
	Assert(kind > CLAIMS_REFUSAL_NONE && kind < CLAIMS_REFUSAL_NKINDS);
	if (detail->data[detail->len - 1] != ':')
		appendStringInfoChar(detail, ';');
	appendStringInfo(detail, " %s %s=", claims_refusal_kinds[kind].name, subject);
	for (int i = 0; i < len; i++)
	{
		unsigned char ch = (unsigned char) value[i];

		if (ch < 0x20 || ch == 0x7F || ch == '%' || ch == ';')
			appendStringInfo(detail, "%%%02X", ch);
		else
			appendStringInfoChar(detail, (char) ch);
	}
}

/* The value of one hex digit, or -1. */
static int
claims_refusal_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* The kind named name, or NONE. */
static ClaimsRefusalKind
claims_refusal_kind(const char *name)
{
	for (int k = CLAIMS_REFUSAL_NONE + 1; k < CLAIMS_REFUSAL_NKINDS; k++)
	{
		if (strcmp(claims_refusal_kinds[k].name, name) == 0)
			return (ClaimsRefusalKind) k;
	}
	return CLAIMS_REFUSAL_NONE;
}

/*
 * The faults the DETAIL's line names (a List of ClaimsFault), or NIL when
 * the DETAIL has no such line or it does not parse. Never raises.
 */
List *
claims_refusal_parse(const char *detail)
{
	const char *nl;
	const char *p;
	List	   *faults = NIL;

	if (detail == NULL || (nl = strrchr(detail, '\n')) == NULL ||
		strncmp(nl + 1, CLAIMS_REFUSAL_MARKER, strlen(CLAIMS_REFUSAL_MARKER)) != 0)
		return NIL;
	p = nl + 1 + strlen(CLAIMS_REFUSAL_MARKER);
	while (*p != '\0')
	{
		ClaimsFault *f = palloc0(sizeof(ClaimsFault));
		const char *start;
		StringInfoData value;

		if (faults != NIL && *p++ != ';')
			goto malformed;
		if (*p++ != ' ')
			goto malformed;
		start = p;
		while ((*p >= 'a' && *p <= 'z') || *p == '_')
			p++;
		if (p == start || *p != ' ')
			goto malformed;
		f->kind_name = pnstrdup(start, p - start);
		f->kind = claims_refusal_kind(f->kind_name);
		start = ++p;
		while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			   (*p >= '0' && *p <= '9') || *p == '_')
			p++;
		if (p == start || *p != '=')
			goto malformed;
		f->subject = pnstrdup(start, p - start);
		p++;
		initStringInfo(&value);
		while (*p != '\0' && *p != ';')
		{
			if (*p == '%')
			{
				int			hi = claims_refusal_hex(p[1]);
				int			lo = hi < 0 ? -1 : claims_refusal_hex(p[2]);

				if (lo < 0 || hi * 16 + lo == 0)
					goto malformed;
				appendStringInfoChar(&value, (char) (hi * 16 + lo));
				p += 3;
			}
			else
				appendStringInfoChar(&value, *p++);
		}
		f->value = value.data;
		faults = lappend(faults, f);
	}
	return faults;

malformed:
	list_free_deep(faults);
	return NIL;
}

/* The DETAIL without its line: the human text, to quote. */
char *
claims_refusal_text(const char *detail)
{
	const char *nl;

	if (detail == NULL)
		return NULL;
	nl = strrchr(detail, '\n');
	if (nl == NULL || strncmp(nl + 1, CLAIMS_REFUSAL_MARKER, strlen(CLAIMS_REFUSAL_MARKER)) != 0)
		return pstrdup(detail);
	return pnstrdup(detail, nl - detail);
}
