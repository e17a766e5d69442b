/*-------------------------------------------------------------------------
 *
 * collect.c
 *	  The transaction's change log: every change of a claimed value the
 *	  row triggers (triggers.c) record, kept in backend memory until the
 *	  transaction ends, by value for folding (xact.c).
 *
 * Trigger arguments (written by claim_column, named by CellTriggerArg in
 * claims_cell.h): the claimed column's attribute number, bucket type,
 * subject type, subject column's attribute number, source type, the source
 * key's attribute numbers ("1", or "1,3": the primary key's columns in key
 * order), whether the bucket type is integer-valued, and (from 1.4) the
 * mode. The numbers are the declared table's; a partition's cloned trigger
 * maps them (partitions.c), and its changes are recorded for the declared
 * table. Attribute numbers survive RENAME COLUMN and RENAME TABLE;
 * messages use the current names. INSERT
 * creates the new value, DELETE destroys the old one, an UPDATE that
 * changes the value does both, an UPDATE of only the subject or the
 * source destroys and creates the same value (a replace at the store).
 * NULL and blank values are skipped.
 * Changes of a subtransaction that rolls back are forgotten.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/uuid.h"


/* A claims_cell.set_constraints() of the transaction. */
typedef struct CellOverride
{
	Oid			relid;			/* InvalidOid: every claimed column */
	AttrNumber	attnum;			/* 0: every claimed column of relid */
	bool		deferred;
	int			level;			/* transaction nesting level that set it */
} CellOverride;

/* Claimed values under one hash (collisions chain). */
typedef struct CellKeyEntry
{
	uint64		hash;
	List	   *chain;			/* CellKey */
} CellKeyEntry;

static MemoryContext cell_pending_cxt = NULL;
static List *cell_pending = NIL;
static List *cell_new = NIL;	/* the NEW changes, for the statement's end */
static List *cell_interned = NIL;	/* the names the changes share */
static List *cell_overrides = NIL;	/* CellOverride, in order */
static HTAB *cell_keys = NULL;	/* CellKeyEntry by the hash of "TYPE=value" */

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
	cell_new = NIL;
	cell_interned = NIL;
	cell_overrides = NIL;
	cell_keys = NULL;
	if (cell_pending_cxt)
		MemoryContextReset(cell_pending_cxt);
}

/* The NEW changes, handed to the end of the statement (and forgotten here). */
List *
cell_take_new_changes(void)
{
	List	   *l = cell_new;

	cell_new = NIL;
	return l;
}

/* Attach a change to the record of its value, creating it (cell_pending_cxt). */
static void
cell_key_attach(CellChange *c)
{
	char	   *key = psprintf("%s=%s", c->bucket_type, c->value);
	uint64		hash = hash_bytes_extended((const unsigned char *) key, strlen(key), 0);
	bool		found;
	CellKeyEntry *entry;
	CellKey    *k = NULL;
	ListCell   *lc;

	if (cell_keys == NULL)
	{
		HASHCTL		ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(uint64);
		ctl.entrysize = sizeof(CellKeyEntry);
		ctl.hcxt = cell_pending_cxt;
		cell_keys = hash_create("claims_cell values", 256, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(cell_keys, &hash, HASH_ENTER, &found);
	if (!found)
		entry->chain = NIL;
	foreach(lc, entry->chain)
	{
		if (strcmp(((CellKey *) lfirst(lc))->key, key) == 0)
			k = lfirst(lc);
	}
	if (k == NULL)
	{
		k = palloc0(sizeof(CellKey));
		k->key = key;
		entry->chain = lappend(entry->chain, k);
	}
	else
		pfree(key);
	k->changes = lappend(k->changes, c);
	/* a change recorded now is NEW or DEFERRED; a rebuild unleased the rest */
	if (c->state == CELL_CHANGE_LEASED)
		k->lease = c->lease;
	c->key = k;
}

/*
 * After a subtransaction rolled back: build the records of the values
 * again from the changes that stay. A change under a lease the rollback
 * took back (claims_cell.set_constraints('IMMEDIATE') in the savepoint, of
 * a change made before it) goes back to COMMIT, as PostgreSQL's deferred
 * checks fired in a savepoint that rolls back do.
 */
static void
cell_rebuild_keys(bool (*lease_live) (const struct CellLease *lease))
{
	MemoryContext old = MemoryContextSwitchTo(cell_pending_cxt);
	ListCell   *lc;

	if (cell_keys != NULL)
		hash_destroy(cell_keys);
	cell_keys = NULL;
	cell_new = NIL;
	foreach(lc, cell_pending)
	{
		CellChange *c = lfirst(lc);

		if (c->state == CELL_CHANGE_FLUSHING ||
			(c->state == CELL_CHANGE_LEASED && !lease_live(c->lease)))
		{
			c->state = CELL_CHANGE_DEFERRED;
			c->lease = NULL;
		}
		if (c->state == CELL_CHANGE_NEW)
			cell_new = lappend(cell_new, c);
		cell_key_attach(c);
	}
	MemoryContextSwitchTo(old);
}

/*
 * Savepoints: a subtransaction that rolls back forgets its changes and its
 * set_constraints(); one that commits hands them to its parent. Called
 * after the leases had the event (xact.c), with lease_live saying which
 * of them still stand.
 */
void
cell_changes_subxact(SubXactEvent event, bool (*lease_live) (const struct CellLease *lease))
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	foreach(lc, cell_overrides)
	{
		CellOverride *o = lfirst(lc);

		if (o->level < level)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			cell_overrides = foreach_delete_current(cell_overrides, lc);
		else if (event == SUBXACT_EVENT_COMMIT_SUB)
			o->level = level - 1;
	}
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
		cell_rebuild_keys(lease_live);
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

/*
 * Whether a change of a column is deferred to COMMIT now: its declaration's
 * mode (CELL_TRIGGER_ARG_MODE; triggers made before 1.4 have none and
 * are deferred), unless the transaction's latest set_constraints() naming the
 * column says otherwise. Columns that are not deferrable are immediate.
 */
static bool
cell_column_deferred(Trigger *trigger, Oid relid, AttrNumber attnum, bool *deferrable)
{
	char		mode = trigger->tgnargs >= CELL_TRIGGER_NARGS_MODE
		? trigger->tgargs[CELL_TRIGGER_ARG_MODE][0] : 'd';
	bool		deferred = mode == 'd';
	ListCell   *lc;

	*deferrable = mode != 'i';
	if (!*deferrable)
		return false;
	foreach(lc, cell_overrides)
	{
		CellOverride *o = lfirst(lc);

		if ((o->relid == InvalidOid || o->relid == relid) &&
			(o->attnum == 0 || o->attnum == attnum))
			deferred = o->deferred;
	}
	return deferred;
}

/*
 * claims_cell.set_constraints(): from now on in this transaction, claim
 * the deferrable columns named (relid 0: all, attnum 0: all of the table)
 * at COMMIT or at the end of each statement. Switching to immediate also
 * makes their changes collected so far immediate (the caller claims them
 * now), as SET CONSTRAINTS ... IMMEDIATE checks what was deferred.
 */
void
cell_defer_changes(Oid relid, AttrNumber attnum, bool deferred)
{
	MemoryContext old;
	CellOverride *o;
	ListCell   *lc;

	if (cell_pending_cxt == NULL)
		cell_pending_cxt = AllocSetContextCreate(TopMemoryContext, "claims_cell changes",
												 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cell_pending_cxt);
	o = palloc0(sizeof(CellOverride));
	o->relid = relid;
	o->attnum = attnum;
	o->deferred = deferred;
	o->level = GetCurrentTransactionNestLevel();
	cell_overrides = lappend(cell_overrides, o);
	if (!deferred)
	{
		foreach(lc, cell_pending)
		{
			CellChange *c = lfirst(lc);

			if (c->state == CELL_CHANGE_DEFERRED && c->deferrable &&
				(relid == InvalidOid || c->relid == relid) &&
				(attnum == 0 || c->attnum == attnum))
			{
				c->state = CELL_CHANGE_NEW;
				cell_new = lappend(cell_new, c);
			}
		}
	}
	MemoryContextSwitchTo(old);
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

/* A claimed attribute number of the trigger's table: a live column, or 42703. */
static int
cell_attnum(Relation rel, AttrNumber attnum)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (attnum <= 0 || attnum > desc->natts ||
		TupleDescAttr(desc, attnum - 1)->attisdropped)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("claimed attribute %d of table \"%s\" does not exist", attnum,
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

/* Remember one change of one row, for a claimed column's trigger. */
static void
cell_record(Relation rel, Trigger *trigger, HeapTuple tuple, bool create)
{
	char	  **args = trigger->tgargs;
	CellTriggerColumns cols;
	const CellTriggerColumns *m = &cols;
	int			attnum;
	char	   *value;
	bool		integer_valued = args[CELL_TRIGGER_ARG_INTEGER_VALUED][0] == 't';
	CellChange *c;
	MemoryContext old;
	int64		subject_id = 0;
	char	   *source_id = NULL;
	int			source_len = 0;

	cell_trigger_columns(rel, trigger, &cols);
	attnum = cell_attnum(rel, m->attnum);
	value = cell_claimed_text(rel, tuple, attnum);
	if (value == NULL || cell_value_is_blank(value))
		return;
	if (create)
	{
		int			subject_attnum = cell_attnum(rel, m->subject_attnum);

		cell_check_value(rel, attnum, value, integer_valued, args[CELL_TRIGGER_ARG_BUCKET_TYPE]);
		if (!cell_subject_id(rel, tuple, subject_attnum, &subject_id) ||
			subject_id == 0)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("cannot claim value of column \"%s\" of table \"%s\" without a subject",
							cell_attname(rel, attnum), RelationGetRelationName(rel)),
					 errdetail("Subject column \"%s\" is NULL or 0.",
							   cell_attname(rel, subject_attnum)),
					 errtablecol(rel, attnum)));
		source_id = cell_source_id(rel, tuple, &m->source, &source_len);
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
		source_id = cell_source_id(rel, tuple, &m->source, &source_len);

	if (cell_pending_cxt == NULL)
		cell_pending_cxt = AllocSetContextCreate(TopMemoryContext, "claims_cell changes",
												 ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cell_pending_cxt);
	c = palloc0(sizeof(CellChange));
	c->create = create;
	c->state = cell_column_deferred(trigger, m->declared, m->declared_attnum, &c->deferrable)
		? CELL_CHANGE_DEFERRED : CELL_CHANGE_NEW;
	c->level = GetCurrentTransactionNestLevel();
	/* a partition's change is the declared table's */
	c->relid = m->declared;
	c->attnum = m->declared_attnum;
	c->column = cell_intern(cell_attname(rel, attnum));
	c->bucket_type = cell_intern(args[CELL_TRIGGER_ARG_BUCKET_TYPE]);
	c->value = pstrdup(value);
	c->subject_type = cell_intern(args[CELL_TRIGGER_ARG_SUBJECT_TYPE]);
	c->subject_id = subject_id;
	c->source_type = cell_intern(args[CELL_TRIGGER_ARG_SOURCE_TYPE]);
	c->source_id = palloc(source_len);
	memcpy(c->source_id, source_id, source_len);
	c->source_len = source_len;
	cell_pending = lappend(cell_pending, c);
	if (c->state == CELL_CHANGE_NEW)
		cell_new = lappend(cell_new, c);
	cell_key_attach(c);
	MemoryContextSwitchTo(old);
}

/* Remember the claim of a row's new value (INSERT). */
void
cell_record_create(Relation rel, Trigger *trigger, HeapTuple tuple)
{
	cell_record(rel, trigger, tuple, true);
}

/* Remember the release of a row's value (DELETE; TRUNCATE, as its DELETE would). */
void
cell_record_destroy(Relation rel, Trigger *trigger, HeapTuple tuple)
{
	cell_record(rel, trigger, tuple, false);
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
 * Remember what an UPDATE did to a row's claim: a new value, or the same
 * value with a new subject or source (a replace), is a destroy of the old
 * and a create of the new; any other UPDATE claims nothing.
 */
void
cell_record_update(Relation rel, Trigger *trigger, HeapTuple oldt, HeapTuple newt)
{
	CellTriggerColumns cols;
	const CellTriggerColumns *m = &cols;
	int			attnum;
	bool		key_differs = false;
	char	   *oldv;
	char	   *newv;
	bool		same;

	cell_trigger_columns(rel, trigger, &cols);
	attnum = cell_attnum(rel, m->attnum);
	oldv = cell_claimed_text(rel, oldt, attnum);
	newv = cell_claimed_text(rel, newt, attnum);
	same = (oldv == NULL && newv == NULL) ||
		(oldv != NULL && newv != NULL && strcmp(oldv, newv) == 0);

	for (int i = 0; i < m->source.n; i++)
		key_differs |= cell_column_differs(rel, oldt, newt, cell_attnum(rel, m->source.attnums[i]));
	if (!same || key_differs ||
		cell_column_differs(rel, oldt, newt, cell_attnum(rel, m->subject_attnum)))
	{
		/* a new value, or the same value with new metadata (a replace) */
		cell_record(rel, trigger, oldt, false);
		cell_record(rel, trigger, newt, true);
	}
}
