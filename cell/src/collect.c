/*-------------------------------------------------------------------------
 *
 * collect.c
 *	  Row triggers of claimed columns: remember every change of a claimed
 *	  value in backend memory until the transaction ends.
 *
 * Trigger arguments (written by claim_column): the claimed column's
 * attribute number, bucket type, subject type, subject column's attribute
 * number, source type, source column's attribute number, whether the
 * bucket type is integer-valued. Attribute numbers survive RENAME COLUMN
 * and RENAME TABLE; messages use the current names. INSERT creates the new value, DELETE
 * destroys the old one, an UPDATE that changes the value does both, an
 * UPDATE of only the subject or the source destroys and creates the same
 * value (a replace at the store). NULL and blank values are skipped.
 * Changes of a subtransaction that rolls back are forgotten.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/uuid.h"

PG_FUNCTION_INFO_V1(claims_cell_collect);
PG_FUNCTION_INFO_V1(claims_cell_refuse_truncate);
PG_FUNCTION_INFO_V1(claims_cell_changed_in_transaction);

#define CELL_TRIGGER_NARGS 7

static MemoryContext cell_pending_cxt = NULL;
static List *cell_pending = NIL;
static List *cell_interned = NIL;	/* the names the changes share */

/* The changes recorded so far, in order. */
List *
cell_pending_changes(void)
{
	return cell_pending;
}

/* Whether the transaction has recorded any change. */
bool
cell_has_pending(void)
{
	return cell_pending != NIL;
}

/* Forget every recorded change (end of transaction). */
void
cell_forget_changes(void)
{
	cell_pending = NIL;
	cell_interned = NIL;
	if (cell_pending_cxt)
		MemoryContextReset(cell_pending_cxt);
}

/*
 * Savepoints: a subtransaction that rolls back forgets its changes; one
 * that commits hands them to its parent.
 */
void
cell_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	cell_leases_subxact(event);
	if (cell_pending == NIL)
		return;
	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, cell_pending)
		{
			CellChange *c = lfirst(lc);

			if (c->level >= level)
				cell_pending = foreach_delete_current(cell_pending, lc);
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, cell_pending)
		{
			CellChange *c = lfirst(lc);

			if (c->level >= level)
				c->level = level - 1;
		}
	}
}

/* Empty or only white space: not a value (Rails' blank?). */
bool
cell_value_is_blank(const char *s)
{
	for (; *s; s++)
		if (!strchr(" \t\n\r\f\v", *s))
			return false;
	return true;
}

/* The canonical decimal text of an int64, as the store requires ("42", "-7"). */
bool
cell_is_canonical_int64(const char *s)
{
	int64		n;
	const char *digits = (*s == '-') ? s + 1 : s;
	char	   *end;

	if (*digits < '0' || *digits > '9')
		return false;
	if (digits[0] == '0' && digits[1] != '\0')
		return false;
	if (*s == '-' && strcmp(digits, "0") == 0)
		return false;
	errno = 0;
	n = strtoi64(s, &end, 10);
	(void) n;
	return errno == 0 && *end == '\0';
}

/* Attribute number given by a trigger argument: a live column of the table. */
static int
cell_attnum(Relation rel, const char *arg)
{
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *end;
	long		attnum = strtol(arg, &end, 10);

	if (*end != '\0' || attnum <= 0 || attnum > desc->natts ||
		TupleDescAttr(desc, attnum - 1)->attisdropped)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("claimed attribute %s of table \"%s\" does not exist", arg,
						RelationGetRelationName(rel)),
				 errhint("Claim the column again with claims_cell.claim_column.")));
	return (int) attnum;
}

/* Current name of a column. */
static char *
cell_attname(Relation rel, int attnum)
{
	return NameStr(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attname);
}

/* The subject id of a row (an integer column), or false when NULL. */
static bool
cell_subject_id(Relation rel, HeapTuple tuple, int attnum, int64 *id)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, attnum, &isnull);

	if (isnull)
		return false;
	switch (TupleDescAttr(desc, attnum - 1)->atttypid)
	{
		case INT2OID:
			*id = DatumGetInt16(d);
			break;
		case INT4OID:
			*id = DatumGetInt32(d);
			break;
		case INT8OID:
			*id = DatumGetInt64(d);
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("subject column of table \"%s\" is not an integer column",
							RelationGetRelationName(rel))));
	}
	return true;
}

/*
 * The source id of a row: integer keys as 8 bytes big-endian, uuid as its
 * 16 bytes, text as its bytes.
 */
static char *
cell_source_id(Relation rel, HeapTuple tuple, int attnum, int *len)
{
	TupleDesc	desc = RelationGetDescr(rel);
	bool		isnull;
	Datum		d = SPI_getbinval(tuple, desc, attnum, &isnull);
	Oid			typid = TupleDescAttr(desc, attnum - 1)->atttypid;
	int64		n;
	char	   *out;

	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("source column of table \"%s\" is NULL", RelationGetRelationName(rel))));
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
			n = typid == INT2OID ? DatumGetInt16(d) :
				typid == INT4OID ? DatumGetInt32(d) : DatumGetInt64(d);
			out = palloc(8);
			for (int i = 0; i < 8; i++)
				out[i] = (char) ((uint64) n >> (56 - 8 * i));
			*len = 8;
			return out;
		case UUIDOID:
			out = palloc(UUID_LEN);
			memcpy(out, DatumGetUUIDP(d)->data, UUID_LEN);
			*len = UUID_LEN;
			return out;
		case TEXTOID:
		case VARCHAROID:
			{
				text	   *t = DatumGetTextPP(d);

				*len = VARSIZE_ANY_EXHDR(t);
				out = palloc(*len + 1);
				memcpy(out, VARDATA_ANY(t), *len);
				return out;
			}
		default:
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("source column of table \"%s\" has a type that cannot be a source id",
							RelationGetRelationName(rel))));
	}
	return NULL;				/* keep compiler quiet */
}

/* Check a value about to be created: fail now what the store would refuse. */
static void
cell_check_value(Relation rel, int attnum, const char *value,
				 bool integer_valued, const char *bucket_type)
{
	char	   *column = cell_attname(rel, attnum);
	int			nchars = pg_mbstrlen(value);

	if (nchars > CELL_MAX_VALUE_CHARS)
		ereport(ERROR,
				(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
				 errmsg("value of claimed column \"%s\" of table \"%s\" is too long to claim",
						column, RelationGetRelationName(rel)),
				 errdetail("Claimed values are at most %d characters; this one has %d.",
						   CELL_MAX_VALUE_CHARS, nchars),
				 errtablecol(rel, attnum)));
	if (integer_valued && !cell_is_canonical_int64(value))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("value \"%.64s\" of claimed column \"%s\" of table \"%s\" is not a canonical integer",
						value, column, RelationGetRelationName(rel)),
				 errdetail("%s values are decimal integers without sign or leading zeros.",
						   bucket_type),
				 errtablecol(rel, attnum)));
}

/*
 * The claimed text of a column's value, or NULL: its output, except that a
 * char(n) value loses its padding, as its cast to text does. One form for
 * the trigger, verify() (which reads column::text) and every message.
 */
char *
cell_claimed_text(Relation rel, HeapTuple tuple, int attnum)
{
	char	   *value = SPI_getvalue(tuple, RelationGetDescr(rel), attnum);
	Oid			typid = TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid;

	if (value != NULL && getBaseType(typid) == BPCHAROID)
	{
		int			len = strlen(value);

		while (len > 0 && value[len - 1] == ' ')
			len--;
		value[len] = '\0';
	}
	return value;
}

/*
 * One copy per transaction of a name every change of a column repeats
 * (column, bucket, subject and source types), in cell_pending_cxt.
 */
static char *
cell_intern(const char *s)
{
	ListCell   *lc;

	foreach(lc, cell_interned)
	{
		if (strcmp(lfirst(lc), s) == 0)
			return lfirst(lc);
	}
	cell_interned = lappend(cell_interned, pstrdup(s));
	return llast(cell_interned);
}

/* Remember one change of one row. */
static void
cell_record(TriggerData *td, HeapTuple tuple, bool create)
{
	Relation	rel = td->tg_relation;
	char	  **args = td->tg_trigger->tgargs;
	int			attnum = cell_attnum(rel, args[0]);
	char	   *value = cell_claimed_text(rel, tuple, attnum);
	bool		integer_valued = args[6][0] == 't';
	CellChange *c;
	MemoryContext old;
	int64		subject_id = 0;
	char	   *source_id = NULL;
	int			source_len = 0;

	if (value == NULL || cell_value_is_blank(value))
		return;
	if (create)
	{
		int			subject_attnum = cell_attnum(rel, args[3]);

		cell_check_value(rel, attnum, value, integer_valued, args[1]);
		if (!cell_subject_id(rel, tuple, subject_attnum, &subject_id) ||
			subject_id == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("cannot claim value of column \"%s\" of table \"%s\" without a subject",
							cell_attname(rel, attnum), RelationGetRelationName(rel)),
					 errdetail("Subject column \"%s\" is NULL or 0.",
							   cell_attname(rel, subject_attnum)),
					 errtablecol(rel, attnum)));
		source_id = cell_source_id(rel, tuple, cell_attnum(rel, args[5]), &source_len);
		if (source_len < 1 || source_len > CELL_MAX_SOURCE_ID)
			ereport(ERROR,
					(errcode(ERRCODE_STRING_DATA_RIGHT_TRUNCATION),
					 errmsg("primary key of table \"%s\" cannot be a source id",
							RelationGetRelationName(rel)),
					 errdetail("Source ids are 1 to %d bytes; this one has %d.",
							   CELL_MAX_SOURCE_ID, source_len)));
	}
	else if (pg_mbstrlen(value) > CELL_MAX_VALUE_CHARS ||
			 (integer_valued && !cell_is_canonical_int64(value)))
		return;					/* never claimable, so never claimed */
	else						/* the row it leaves, for folding */
		source_id = cell_source_id(rel, tuple, cell_attnum(rel, args[5]), &source_len);

	if (cell_pending_cxt == NULL)
		cell_pending_cxt = AllocSetContextCreate(TopMemoryContext, "claims_cell changes",
												 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cell_pending_cxt);
	c = palloc0(sizeof(CellChange));
	c->create = create;
	c->level = GetCurrentTransactionNestLevel();
	c->relid = RelationGetRelid(rel);
	c->attnum = attnum;
	c->column = cell_intern(cell_attname(rel, attnum));
	c->bucket_type = cell_intern(args[1]);
	c->value = pstrdup(value);
	c->subject_type = cell_intern(args[2]);
	c->subject_id = subject_id;
	c->source_type = cell_intern(args[4]);
	c->source_id = palloc(source_len);
	memcpy(c->source_id, source_id, source_len);
	c->source_len = source_len;
	cell_pending = lappend(cell_pending, c);
	MemoryContextSwitchTo(old);
}

/* Whether two rows differ in a column (by binary image). */
static bool
cell_column_differs(Relation rel, HeapTuple a, HeapTuple b, int attnum)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);
	bool		na,
				nb;
	Datum		da = heap_getattr(a, attnum, desc, &na);
	Datum		db = heap_getattr(b, attnum, desc, &nb);

	if (na || nb)
		return na != nb;
	return !datumIsEqual(da, db, att->attbyval, att->attlen);
}

/*
 * claims_cell.collect(): AFTER INSERT OR UPDATE OR DELETE row trigger of a
 * claimed column.
 */
Datum
claims_cell_collect(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Relation	rel;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!TRIGGER_FIRED_AFTER(td->tg_event))
		elog(ERROR, "claims_cell.collect() must be an AFTER ROW trigger");
	if (td->tg_trigger->tgnargs != CELL_TRIGGER_NARGS)
		elog(ERROR, "claims_cell.collect() takes %d trigger arguments", CELL_TRIGGER_NARGS);
	rel = td->tg_relation;

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		cell_record(td, td->tg_trigtuple, true);
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		cell_record(td, td->tg_trigtuple, false);
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		char	  **args = td->tg_trigger->tgargs;
		HeapTuple	oldt = td->tg_trigtuple;
		HeapTuple	newt = td->tg_newtuple;
		int			attnum = cell_attnum(rel, args[0]);
		char	   *oldv = cell_claimed_text(rel, oldt, attnum);
		char	   *newv = cell_claimed_text(rel, newt, attnum);
		bool		same = (oldv == NULL && newv == NULL) ||
			(oldv != NULL && newv != NULL && strcmp(oldv, newv) == 0);

		if (!same ||
			cell_column_differs(rel, oldt, newt, cell_attnum(rel, args[3])) ||
			cell_column_differs(rel, oldt, newt, cell_attnum(rel, args[5])))
		{
			/* a new value, or the same value with new metadata (a replace) */
			cell_record(td, oldt, false);
			cell_record(td, newt, true);
		}
	}
	return PointerGetDatum(NULL);
}

/* claims_cell.refuse_truncate(): TRUNCATE would release no claim. */
Datum
claims_cell_refuse_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "claims_cell.refuse_truncate() must be called as a trigger");
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("cannot truncate table \"%s\" because it has claimed columns",
					RelationGetRelationName(td->tg_relation)),
			 errdetail("TRUNCATE would leave the values of its rows claimed at the claims store."),
			 errhint("Delete the rows instead, or stop claiming with claims_cell.unclaim_column first.")));
	PG_RETURN_NULL();
}

/*
 * claims_cell.changed_in_transaction(table regclass): whether the current
 * transaction changed claimed values of the table (claimed at its COMMIT).
 */
Datum
claims_cell_changed_in_transaction(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	ListCell   *lc;

	foreach(lc, cell_pending)
	{
		if (((CellChange *) lfirst(lc))->relid == relid)
			PG_RETURN_BOOL(true);
	}
	PG_RETURN_BOOL(false);
}
