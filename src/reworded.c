/*-------------------------------------------------------------------------
 *
 * reworded.c
 *	  A test build of the store whose every message reads differently
 *	  (make COPT=-DCLAIMS_REWORDED_MESSAGES; cell/test/t/070_reworded_store.pl
 *	  builds it into a private directory). A cell that understands the store
 *	  through the refusal contract (refusal.h) and the SQLSTATEs, not its
 *	  wording, must fail the same way against it. In every other build this
 *	  file is empty.
 *
 * Every error and warning a backend of this library sends its client is
 * rewritten where it leaves (emit_log_hook): PostgreSQL's own and the
 * store's, those of today and of later releases. The primary message gets
 * a prefix and a suffix, the DETAIL (all but its contract line) and the
 * HINT a prefix, and in all three the braces of a label become angle
 * brackets, so no wording a cell might match survives.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#ifdef CLAIMS_REWORDED_MESSAGES

#include "utils/elog.h"

static emit_log_hook_type claims_reworded_prev_hook = NULL;

/* text with a prefix, a suffix and <> for {}, in the ErrorContext. */
static char *
claims_reword(const char *text, const char *prefix, const char *suffix)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, prefix);
	for (const char *p = text; *p; p++)
		appendStringInfoChar(&buf, *p == '{' ? '<' : *p == '}' ? '>' : *p);
	appendStringInfoString(&buf, suffix);
	return buf.data;
}

/* Reword what goes to the client, keeping the contract's line of the DETAIL. */
static void
claims_reworded_hook(ErrorData *edata)
{
	if (edata->output_to_client)
	{
		if (edata->message)
			edata->message = claims_reword(edata->message, "store says: ", " (reworded)");
		if (edata->detail)
		{
			char	   *text = claims_refusal_text(edata->detail);
			const char *line = edata->detail + strlen(text);

			edata->detail = psprintf("%s%s", claims_reword(text, "In other words: ", ""), line);
		}
		if (edata->hint)
			edata->hint = claims_reword(edata->hint, "Advice: ", "");
	}
	if (claims_reworded_prev_hook)
		claims_reworded_prev_hook(edata);
}

/* Install the hook (from _PG_init). */
void
claims_reworded_init(void)
{
	claims_reworded_prev_hook = emit_log_hook;
	emit_log_hook = claims_reworded_hook;
}

#else

/* Nothing to install in a release build. */
void
claims_reworded_init(void)
{
}

#endif							/* CLAIMS_REWORDED_MESSAGES */
