/*-------------------------------------------------------------------------
 *
 * collect.c
 *	  Row triggers of claimed columns: remember every change of a claimed
 *	  value in backend memory until the transaction ends.
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

PG_FUNCTION_INFO_V1(claims_cell_collect);
PG_FUNCTION_INFO_V1(claims_cell_refuse_truncate);
PG_FUNCTION_INFO_V1(claims_cell_changed_in_transaction);
PG_FUNCTION_INFO_V1(claims_cell_claim_statement);
PG_FUNCTION_INFO_V1(claims_cell_set_constraints);
PG_FUNCTION_INFO_V1(claims_cell_collect_truncate);

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
	if (c->state == CELL_CHANGE_LEASED && cell_lease_live(c->lease))
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
cell_rebuild_keys(void)
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
			(c->state == CELL_CHANGE_LEASED && !cell_lease_live(c->lease)))
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
 * Savepoints: a subtransaction that rolls back forgets its changes, its
 * leases (rolled back at the store) and its set_constraints(); one that
 * commits hands them to its parent.
 */
void
cell_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	cell_leases_subxact(event);
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
		cell_rebuild_keys();
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
	const CellTriggerColumns *m = cell_trigger_columns(rel, trigger);
	int			attnum = cell_attnum(rel, m->attnum);
	char	   *value = cell_claimed_text(rel, tuple, attnum);
	bool		integer_valued = args[CELL_TRIGGER_ARG_INTEGER_VALUED][0] == 't';
	CellChange *c;
	MemoryContext old;
	int64		subject_id = 0;
	char	   *source_id = NULL;
	int			source_len = 0;

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

/* Remember the release of a row's value (TRUNCATE), as its DELETE would. */
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
	if (td->tg_trigger->tgnargs != CELL_TRIGGER_NARGS &&
		td->tg_trigger->tgnargs != CELL_TRIGGER_NARGS_MODE)
		elog(ERROR, "claims_cell.collect() takes %d or %d trigger arguments",
			 CELL_TRIGGER_NARGS, CELL_TRIGGER_NARGS_MODE);
	rel = td->tg_relation;

	if (TRIGGER_FIRED_BY_INSERT(td->tg_event))
		cell_record(rel, td->tg_trigger, td->tg_trigtuple, true);
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		cell_record(rel, td->tg_trigger, td->tg_trigtuple, false);
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
	{
		const CellTriggerColumns *m = cell_trigger_columns(rel, td->tg_trigger);
		HeapTuple	oldt = td->tg_trigtuple;
		HeapTuple	newt = td->tg_newtuple;
		int			attnum = cell_attnum(rel, m->attnum);
		bool		key_differs = false;
		char	   *oldv = cell_claimed_text(rel, oldt, attnum);
		char	   *newv = cell_claimed_text(rel, newt, attnum);
		bool		same = (oldv == NULL && newv == NULL) ||
			(oldv != NULL && newv != NULL && strcmp(oldv, newv) == 0);

		for (int i = 0; i < m->source.n; i++)
			key_differs |= cell_column_differs(rel, oldt, newt, cell_attnum(rel, m->source.attnums[i]));
		if (!same || key_differs ||
			cell_column_differs(rel, oldt, newt, cell_attnum(rel, m->subject_attnum)))
		{
			/* a new value, or the same value with new metadata (a replace) */
			cell_record(rel, td->tg_trigger, oldt, false);
			cell_record(rel, td->tg_trigger, newt, true);
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

/*
 * claims_cell.claim_statement(): AFTER statement trigger of a claimed
 * table. It fires after the statement's row triggers (those of rows that
 * cascades changed too), and claims the immediate changes collected.
 */
Datum
claims_cell_claim_statement(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || TRIGGER_FIRED_FOR_ROW(td->tg_event) ||
		!TRIGGER_FIRED_AFTER(td->tg_event))
		elog(ERROR, "claims_cell.claim_statement() must be an AFTER STATEMENT trigger");
	cell_claim_statement();
	return PointerGetDatum(NULL);
}

/*
 * The oid of claims_cell.collect(), looked up in the catalog without a
 * privilege check: the TRUNCATE trigger runs as whoever truncates (a
 * table's owner without USAGE on the schema claims_cell), and naming the
 * function through the parser's lookup would demand that USAGE. With
 * missing_ok, InvalidOid when the extension is gone.
 */
Oid
cell_collect_oid(bool missing_ok)
{
	Oid			nsp = get_namespace_oid("claims_cell", missing_ok);
	Oid			oid = OidIsValid(nsp)
		? GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("collect"),
						  PointerGetDatum(buildoidvector(NULL, 0)), ObjectIdGetDatum(nsp))
		: InvalidOid;

	if (!OidIsValid(oid) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function claims_cell.collect() does not exist")));
	return oid;
}

/*
 * Check what set_constraints names: a table with claimed columns, and when
 * a column is named, a claimed column that is deferrable (as SET
 * CONSTRAINTS refuses a constraint that is not). Returns its attnum, or 0.
 */
static AttrNumber
cell_check_deferrable(Oid relid, const char *column)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Oid			collect = cell_collect_oid(false);
	AttrNumber	attnum = column ? get_attnum(relid, column) : 0;
	bool		claimed = false;
	bool		deferrable = false;

	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];

		if (t->tgfoid != collect || t->tgnargs < CELL_TRIGGER_NARGS ||
			(attnum != 0 && atoi(t->tgargs[CELL_TRIGGER_ARG_ATTNUM]) != attnum))
			continue;
		claimed = true;
		deferrable |= t->tgnargs < CELL_TRIGGER_NARGS_MODE || t->tgargs[CELL_TRIGGER_ARG_MODE][0] != 'i';
	}
	if (!claimed)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 column ? errmsg("column \"%s\" of table \"%s\" is not claimed", column,
								 RelationGetRelationName(rel))
				 : errmsg("table \"%s\" has no claimed column", RelationGetRelationName(rel))));
	if (column && !deferrable)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("claimed column \"%s\" of table \"%s\" is not deferrable", column,
						RelationGetRelationName(rel)),
				 errhint("Claim it again with claims_cell.claim_column(..., \"deferrable\" => true).")));
	table_close(rel, NoLock);
	return attnum;
}

/*
 * claims_cell.set_constraints(mode text, "table" regclass, "column" name):
 * SET CONSTRAINTS for claimed columns. 'DEFERRED' claims the deferrable
 * ones named (all without a table, all of the table without a column) at
 * COMMIT for the rest of the transaction; 'IMMEDIATE' at the end of each
 * statement, and claims what they deferred so far now.
 */
Datum
claims_cell_set_constraints(PG_FUNCTION_ARGS)
{
	char	   *mode;
	bool		deferred;
	Oid			relid = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);
	AttrNumber	attnum = 0;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("mode must not be NULL")));
	mode = text_to_cstring(PG_GETARG_TEXT_PP(0));
	if (pg_strcasecmp(mode, "deferred") == 0)
		deferred = true;
	else if (pg_strcasecmp(mode, "immediate") == 0)
		deferred = false;
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid mode \"%s\"", mode),
				 errhint("The mode is 'IMMEDIATE' or 'DEFERRED'.")));
	if (!PG_ARGISNULL(2) && !OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("a column needs its table")));
	if (OidIsValid(relid))
		attnum = cell_check_deferrable(relid, PG_ARGISNULL(2) ? NULL : NameStr(*PG_GETARG_NAME(2)));
	if (!IsTransactionBlock())
	{
		ereport(WARNING,
				(errcode(ERRCODE_NO_ACTIVE_SQL_TRANSACTION),
				 errmsg("claims_cell.set_constraints can only be used in transaction blocks")));
		PG_RETURN_VOID();
	}
	cell_defer_changes(relid, attnum, deferred);
	if (!deferred)
		cell_claim_statement();
	PG_RETURN_VOID();
}

/* Whether a trigger fires under the session's replication role. */
static bool
cell_trigger_fires(const Trigger *t)
{
	if (t->tgenabled == TRIGGER_DISABLED)
		return false;
	if (SessionReplicationRole == SESSION_REPLICATION_ROLE_REPLICA)
		return t->tgenabled == TRIGGER_FIRES_ON_REPLICA || t->tgenabled == TRIGGER_FIRES_ALWAYS;
	return t->tgenabled == TRIGGER_FIRES_ON_ORIGIN || t->tgenabled == TRIGGER_FIRES_ALWAYS;
}

/*
 * claims_cell.collect_truncate(): BEFORE TRUNCATE trigger of a claimed
 * table. Every row's value of every claimed column whose trigger would
 * fire is released, as DELETE would: collected now (at the latest row
 * versions: TRUNCATE holds the table alone, and under REPEATABLE READ
 * rows committed since the snapshot go too) and claimed at the end of the
 * statement or at COMMIT, per the column's mode.
 */
Datum
claims_cell_collect_truncate(PG_FUNCTION_ARGS)
{
	TriggerData *td = (TriggerData *) fcinfo->context;
	Relation	rel;
	Oid			collect;
	List	   *triggers = NIL;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;
	MemoryContext row_cxt;
	MemoryContext old;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_BY_TRUNCATE(td->tg_event) ||
		!TRIGGER_FIRED_BEFORE(td->tg_event))
		elog(ERROR, "claims_cell.collect_truncate() must be a BEFORE TRUNCATE trigger");
	rel = td->tg_relation;
	/* a partitioned table holds no rows: each partition's trigger collects its own */
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		return PointerGetDatum(NULL);
	collect = cell_collect_oid(false);
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];

		if (t->tgfoid == collect && cell_trigger_fires(t) &&
			(t->tgnargs == CELL_TRIGGER_NARGS || t->tgnargs == CELL_TRIGGER_NARGS_MODE))
			triggers = lappend(triggers, t);
	}
	if (triggers == NIL)
		return PointerGetDatum(NULL);

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	scan = table_beginscan(rel, snapshot, 0, NULL);
	slot = table_slot_create(rel, NULL);
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "claims_cell truncate row",
									ALLOCSET_DEFAULT_SIZES);
	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		should_free;
		HeapTuple	tuple;
		ListCell   *lc;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(row_cxt);
		tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
		foreach(lc, triggers)
			cell_record(rel, lfirst(lc), tuple, false);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	MemoryContextDelete(row_cxt);
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	cell_claim_truncate(RelationGetRelid(rel));
	return PointerGetDatum(NULL);
}
