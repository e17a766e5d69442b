/*-------------------------------------------------------------------------
 *
 * store_client.c
 *	  What the lease protocol (xact.c) sends the claims store and how it
 *	  reads the answers: claims_begin_update requests and their batches,
 *	  the labels of values, refusals mapped to local errors, the durability
 *	  barrier.
 *
 * A refusal is read through the contract both sides compile (refusal.h):
 * the SQLSTATE and the DETAIL's line naming the values at fault with their
 * kinds, never the wording of the store's messages. Only a store that
 * writes no such line (claims 1.2) is read by its text: the message's
 * suffix names the value of a conflict, the DETAIL the values at fault.
 *
 *-------------------------------------------------------------------------
 */
#include "store_client.h"

#include "common/base64.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"

/* What a refusal says, read once (cell_refusal_read). */
typedef struct CellRefusal
{
	ClaimsRefusalKind kind;		/* what the error is about; NONE when it is
								 * no refusal of values */
	List	   *faults;			/* ClaimsFault of the contract's line */
	bool		legacy;			/* no line: read by the text of claims 1.2 */
	char	   *subject;		/* legacy: the label the message names */
} CellRefusal;

/* "{TYPE=value}", the label of a value in messages (refusal.h). */
char *
cell_value_label(const CellChange *c)
{
	return claims_label(c->bucket_type, c->value, strlen(c->value));
}

/* Append a JSON string. */
static void
cell_json_str(StringInfo buf, const char *s)
{
	escape_json(buf, s);
}

/* Append {"bucket": {"type": ..., "value": ...}} fields of a change. */
static void
cell_json_bucket(StringInfo buf, const CellChange *c)
{
	appendStringInfoString(buf, "{\"bucket\": {\"type\": ");
	cell_json_str(buf, c->bucket_type);
	appendStringInfoString(buf, ", \"value\": ");
	cell_json_str(buf, c->value);
	appendStringInfoChar(buf, '}');
}

/* The claims_begin_update request of one lease's values; counts them. */
char *
cell_request(List *nets, int64 cell_id, const char *lease, int *ncreates, int *ndestroys)
{
	StringInfoData buf;
	ListCell   *lc;
	bool		first;

	*ncreates = *ndestroys = 0;
	initStringInfo(&buf);
	appendStringInfo(&buf, "{\"cell_id\": %lld, \"lease_uuid\": \"%s\", \"create_records\": [",
					 (long long) cell_id, lease);
	first = true;
	foreach(lc, nets)
	{
		CellNet    *n = lfirst(lc);
		CellChange *c = n->last;
		int			enclen;
		char	   *enc;

		if (!c->create)
			continue;
		if (!first)
			appendStringInfoString(&buf, ", ");
		first = false;
		(*ncreates)++;
		cell_json_bucket(&buf, c);
		appendStringInfoString(&buf, ", \"subject\": {\"type\": ");
		cell_json_str(&buf, c->subject_type);
		appendStringInfo(&buf, ", \"id\": \"%lld\"}, \"source\": {\"type\": ",
						 (long long) c->subject_id);
		cell_json_str(&buf, c->source_type);
		enclen = pg_b64_enc_len(c->source_len);
		enc = palloc(enclen + 1);
		enclen = pg_b64_encode(c->source_id, c->source_len, enc, enclen);
		enc[Max(enclen, 0)] = '\0';
		appendStringInfo(&buf, ", \"rails_primary_key_id\": \"%s\"}}", enc);
	}
	appendStringInfoString(&buf, "], \"destroy_records\": [");
	first = true;
	foreach(lc, nets)
	{
		CellNet    *n = lfirst(lc);

		if (!n->existed)
			continue;
		if (!first)
			appendStringInfoString(&buf, ", ");
		first = false;
		(*ndestroys)++;
		cell_json_bucket(&buf, n->last);
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoString(&buf, "]}");
	return buf.data;
}

/* Records a folded value adds to a request: its create and its destroy. */
static int
cell_net_records(const CellNet *n)
{
	return (n->last->create ? 1 : 0) + (n->existed ? 1 : 0);
}

/*
 * Split the folded values into leases of at most limit records each, in
 * order; both halves of a replace stay in one lease. A list of lists.
 */
List *
cell_split(List *nets, int limit)
{
	List	   *chunks = NIL;
	List	   *chunk = NIL;
	int			size = 0;
	ListCell   *lc;

	foreach(lc, nets)
	{
		CellNet    *n = lfirst(lc);
		int			k = cell_net_records(n);

		if (k == 0)
			continue;
		if (chunk != NIL && size + k > limit)
		{
			chunks = lappend(chunks, chunk);
			chunk = NIL;
			size = 0;
		}
		chunk = lappend(chunk, n);
		size += k;
	}
	if (chunk != NIL)
		chunks = lappend(chunks, chunk);
	return chunks;
}

/*
 * Read a refusal of claims_begin_update: its kind from the SQLSTATE and the
 * faults the DETAIL's line lists (the most fundamental kind present whose
 * SQLSTATE it is); without the line, as a claims 1.2 store wrote it.
 */
static void
cell_refusal_read(const CellCallResult *r, CellRefusal *out)
{
	ListCell   *lc;

	memset(out, 0, sizeof(*out));
	out->faults = claims_refusal_parse(r->detail);
	if (out->faults != NIL)
	{
		foreach(lc, out->faults)
		{
			ClaimsFault *f = lfirst(lc);
			const char *s = claims_refusal_kinds[f->kind].sqlstate;

			if (f->kind != CLAIMS_REFUSAL_NONE && s != NULL && strcmp(s, r->sqlstate) == 0 &&
				(out->kind == CLAIMS_REFUSAL_NONE || f->kind < out->kind))
				out->kind = f->kind;
		}
		return;
	}
	out->legacy = true;
	if (r->message == NULL)
		return;
	if (strcmp(r->sqlstate, CLAIMS_SQLSTATE_TAKEN) == 0 ||
		strcmp(r->sqlstate, CLAIMS_SQLSTATE_LEASED) == 0)
	{
		bool		taken = strcmp(r->sqlstate, CLAIMS_SQLSTATE_TAKEN) == 0;
		const char *suffix = taken ? CLAIMS_V12_TAKEN_SUFFIX : CLAIMS_V12_LEASED_SUFFIX;
		int			mlen = strlen(r->message);
		int			slen = strlen(suffix);

		if (mlen > slen && strcmp(r->message + mlen - slen, suffix) == 0)
		{
			out->kind = taken ? CLAIMS_REFUSAL_TAKEN : CLAIMS_REFUSAL_LEASED;
			out->subject = pnstrdup(r->message, mlen - slen);
		}
	}
	else if (r->detail != NULL && strcmp(r->sqlstate, CLAIMS_SQLSTATE_NOT_FOUND) == 0)
		out->kind = CLAIMS_REFUSAL_NOT_CLAIMED;
	else if (r->detail != NULL && strcmp(r->sqlstate, CLAIMS_SQLSTATE_NOT_PERMITTED) == 0 &&
			 strncmp(r->message, CLAIMS_V12_OTHER_CELL_PREFIX, strlen(CLAIMS_V12_OTHER_CELL_PREFIX)) == 0)
		out->kind = CLAIMS_REFUSAL_OTHER_CELL;
}

/*
 * Whether the refusal names the value of c with the given kind (kind NONE:
 * any). Legacy: the message's value for a conflict, any label in the DETAIL
 * otherwise.
 */
static bool
cell_refusal_names(const CellRefusal *f, const CellCallResult *r, ClaimsRefusalKind kind,
				   const CellChange *c)
{
	ListCell   *lc;

	if (f->legacy)
	{
		if (f->subject != NULL)
			return strcmp(f->subject, cell_value_label(c)) == 0;
		return r->detail != NULL && strstr(r->detail, cell_value_label(c)) != NULL;
	}
	foreach(lc, f->faults)
	{
		ClaimsFault *x = lfirst(lc);

		if ((kind == CLAIMS_REFUSAL_NONE || x->kind == kind) &&
			strcmp(x->subject, c->bucket_type) == 0 && strcmp(x->value, c->value) == 0)
			return true;
	}
	return false;
}

/*
 * The change behind the value a conflict is about: the first fault of its
 * kind that is one of nets (the store lists them as the request did), or
 * NULL.
 */
static CellChange *
cell_refusal_change(List *nets, const CellRefusal *f, const CellCallResult *r)
{
	ListCell   *lc;
	ListCell   *lc2;

	if (f->legacy)
	{
		foreach(lc2, nets)
		{
			CellNet    *n = lfirst(lc2);

			if (cell_refusal_names(f, r, f->kind, n->last))
				return n->last;
		}
		return NULL;
	}
	foreach(lc, f->faults)
	{
		ClaimsFault *x = lfirst(lc);

		if (x->kind != f->kind)
			continue;
		foreach(lc2, nets)
		{
			CellNet    *n = lfirst(lc2);

			if (strcmp(x->subject, n->last->bucket_type) == 0 &&
				strcmp(x->value, n->last->value) == 0)
				return n->last;
		}
	}
	return NULL;
}

/* Count a refusal of a verify() repair's lease in claims_cell.stats. */
void
cell_count_refusal(const CellCallResult *r)
{
	cell_stats_count(strcmp(r->sqlstate, CLAIMS_SQLSTATE_TAKEN) == 0 ? CELL_STAT_CONFLICTS_PERMANENT :
					 strcmp(r->sqlstate, CLAIMS_SQLSTATE_LEASED) == 0 ? CELL_STAT_CONFLICTS_TEMPORARY :
					 CELL_STAT_REFUSALS);
}

/*
 * Raise the local error for a begin_update the store refused: a conflict
 * names the table, column and value as a unique constraint would.
 */
void
cell_raise_refusal(List *nets, const CellCallResult *r, int64 cell_id)
{
	const char *s = r->sqlstate;
	bool		permanent = strcmp(s, CLAIMS_SQLSTATE_TAKEN) == 0;
	bool		temporary = strcmp(s, CLAIMS_SQLSTATE_LEASED) == 0;
	CellRefusal f;

	cell_refusal_read(r, &f);
	if (permanent || temporary)
	{
		CellChange *c = NULL;

		cell_stats_count(permanent ? CELL_STAT_CONFLICTS_PERMANENT : CELL_STAT_CONFLICTS_TEMPORARY);
		if (f.kind == (permanent ? CLAIMS_REFUSAL_TAKEN : CLAIMS_REFUSAL_LEASED))
			c = cell_refusal_change(nets, &f, r);
		if (c != NULL)
		{
			char	   *table = get_rel_name(c->relid);
			char	   *schema = get_namespace_name(get_rel_namespace(c->relid));

			if (permanent)
				ereport(ERROR,
						(errcode(ERRCODE_UNIQUE_VIOLATION),
						 errmsg("value \"%s\" of column \"%s\" of table \"%s\" is already claimed by another cell",
								c->value, c->column, table),
						 errdetail("Key (%s)=(%s) already exists in another cell: the claims store holds %s.",
								   c->column, c->value, cell_value_label(c)),
						 err_generic_string(PG_DIAG_SCHEMA_NAME, schema),
						 err_generic_string(PG_DIAG_TABLE_NAME, table),
						 err_generic_string(PG_DIAG_COLUMN_NAME, c->column)));
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("value \"%s\" of column \"%s\" of table \"%s\" is under another lease at the claims store",
							c->value, c->column, table),
					 errdetail("Key (%s)=(%s) is being claimed or released by another transaction: %s",
							   c->column, c->value,
							   r->detail ? claims_refusal_text(r->detail) : psprintf("%s.", cell_value_label(c))),
					 errhint("Nothing was claimed; try again later."),
					 err_generic_string(PG_DIAG_SCHEMA_NAME, schema),
					 err_generic_string(PG_DIAG_TABLE_NAME, table),
					 err_generic_string(PG_DIAG_COLUMN_NAME, c->column)));
		}
	}
	cell_stats_count(CELL_STAT_REFUSALS);
	if (strcmp(s, CLAIMS_SQLSTATE_BATCH_TOO_LARGE) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the claims store refused a lease of this transaction: %s", r->message),
				 errdetail("claims_cell.max_batch_size is %d.", cell_max_batch_size),
				 errhint("Set claims_cell.max_batch_size no higher than the store's claims.max_batch_size.")));
	if (strcmp(s, CLAIMS_SQLSTATE_NOT_PERMITTED) == 0 && f.kind != CLAIMS_REFUSAL_OTHER_CELL)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("the claims store refused to act for cell %lld: %s",
						(long long) cell_id, r->message),
				 errhint("The user mapping of the claims store server must log in as the role registered for this cell (claims_register_cell at the store).")));
	cell_raise_remote(r, "the claims store refused the claims of this transaction");
}

/*
 * Whether what the store did before this call is as durable as a first
 * call's answer: a transaction of its own at the store that writes WAL (a
 * transactional logical message, which any role may emit) commits only
 * once its synchronous standbys have all the WAL written before it. Used
 * after an answer that came only after a try was given up: cancelling
 * that try at the store may have ended its wait for the standby, and a
 * repeat that finds its work done writes nothing and so waits for nothing.
 */
bool
cell_store_barrier(void)
{
	CellCallResult r;

	cell_call_finish("SELECT pg_catalog.pg_logical_emit_message(true, 'claims_cell', '')", 0,
					 NULL, false, &r);
	return r.status == CELL_CALL_OK;
}

/*
 * Whether the store holds a value for this cell, asked with
 * claims_get_record (inside SPI_connect); true when it cannot tell. The
 * create of the lease being superseded (superseded: its uuid, or NULL) is
 * not held: the store transaction that was refused rolls that lease back.
 */
static bool
cell_store_holds(const CellChange *c, int64 cell_id, const char *superseded)
{
	StringInfoData req;
	CellCallResult r;
	const char *params[1];
	Datum		arg;
	Oid			argtype = TEXTOID;
	bool		isnull;
	Datum		owner;

	initStringInfo(&req);
	appendStringInfoString(&req, "{\"bucket\": {\"type\": ");
	escape_json(&req, c->bucket_type);
	appendStringInfoString(&req, ", \"value\": ");
	escape_json(&req, c->value);
	appendStringInfoString(&req, "}}");
	params[0] = req.data;
	cell_call("SELECT %s.claims_get_record($1::jsonb)", 1, params, true, &r);
	if (r.status != CELL_CALL_OK)
		return true;
	if (r.value == NULL)
		return false;			/* nobody claims it */
	arg = CStringGetTextDatum(r.value);
	if (SPI_execute_with_args("SELECT CAST(CAST($1 AS pg_catalog.jsonb) OPERATOR(pg_catalog.->) 'record' OPERATOR(pg_catalog.->>) 'cell_id' AS pg_catalog.int8),"
							  " CAST($1 AS pg_catalog.jsonb) OPERATOR(pg_catalog.->) 'record' OPERATOR(pg_catalog.->>) 'lease_uuid',"
							  " CAST($1 AS pg_catalog.jsonb) OPERATOR(pg_catalog.->) 'record' OPERATOR(pg_catalog.->>) 'status'",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		return true;
	owner = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull && superseded != NULL)
	{
		char	   *lu = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
		char	   *st = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3);

		if (lu != NULL && st != NULL && strcmp(lu, superseded) == 0 &&
			strcmp(st, "LEASE_CREATING") == 0)
			return false;
	}
	return isnull || DatumGetInt64(owner) == cell_id;
}

/*
 * After a refusal to destroy (not claimed, P0002; another cell's, 42501):
 * drop from nets the destroys of values the store does not hold for this
 * cell, each confirmed with claims_get_record, with a WARNING and a count
 * each; a replace of such a value becomes a create. A row going away must
 * not fail on a claim that never was this cell's (a row written with the
 * triggers off, or restored); verify() reports the rest. Only the values
 * the refusal names are asked about; superseded as for cell_store_holds.
 * Returns whether anything was dropped (false for any other refusal).
 */
bool
cell_drop_unclaimed(List **nets, const CellCallResult *r, int64 cell_id, const char *superseded)
{
	bool		dropped = false;
	CellRefusal f;
	ListCell   *lc;

	if (r->status != CELL_CALL_REMOTE_ERROR)
		return false;
	cell_refusal_read(r, &f);
	if (f.kind != CLAIMS_REFUSAL_NOT_CLAIMED && f.kind != CLAIMS_REFUSAL_OTHER_CELL)
		return false;
	foreach(lc, *nets)
	{
		CellNet    *n = lfirst(lc);

		if (!n->existed ||
			!(cell_refusal_names(&f, r, CLAIMS_REFUSAL_NOT_CLAIMED, n->last) ||
			  cell_refusal_names(&f, r, CLAIMS_REFUSAL_OTHER_CELL, n->last)) ||
			cell_store_holds(n->last, cell_id, superseded))
			continue;
		ereport(WARNING,
				(errmsg("claims_cell: value \"%s\" of column \"%s\" of table \"%s\" was not claimed at the claims store",
						n->last->value, n->last->column, get_rel_name(n->last->relid)),
				 errdetail("The row released a value the store does not hold for this cell; claims_cell.verify() reports such drift.")));
		cell_stats_count(CELL_STAT_UNCLAIMED_DESTROYS);
		n->existed = false;
		if (!n->last->create)
			*nets = foreach_delete_current(*nets, lc);
		dropped = true;
	}
	return dropped;
}
