/*-------------------------------------------------------------------------
 *
 * triggers.c
 *	  The SQL entry points of claiming inside a transaction: the row
 *	  trigger of a claimed column (claims_cell.collect()), the statement
 *	  trigger that claims a statement's immediate changes, the TRUNCATE
 *	  triggers, claims_cell.set_constraints() and
 *	  claims_cell.changed_in_transaction(). They record changes in the
 *	  change log (collect.c) and have them claimed (xact.c).
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(claims_cell_collect);
PG_FUNCTION_INFO_V1(claims_cell_refuse_truncate);
PG_FUNCTION_INFO_V1(claims_cell_changed_in_transaction);
PG_FUNCTION_INFO_V1(claims_cell_claim_statement);
PG_FUNCTION_INFO_V1(claims_cell_set_constraints);
PG_FUNCTION_INFO_V1(claims_cell_collect_truncate);

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
		cell_record_create(rel, td->tg_trigger, td->tg_trigtuple);
	else if (TRIGGER_FIRED_BY_DELETE(td->tg_event))
		cell_record_destroy(rel, td->tg_trigger, td->tg_trigtuple);
	else if (TRIGGER_FIRED_BY_UPDATE(td->tg_event))
		cell_record_update(rel, td->tg_trigger, td->tg_trigtuple, td->tg_newtuple);
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

	foreach(lc, cell_pending_changes())
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
	CellTriggerColumns m;
	Trigger    *t;
	int			i = 0;

	while ((t = cell_next_claim_trigger(rel, collect, &i, &m)) != NULL)
	{
		/* the transaction's overrides name declared tables */
		if (m.declared != relid)
			ereport(ERROR,
					(errcode(ERRCODE_WRONG_OBJECT_TYPE),
					 errmsg("table \"%s\" is a partition of table \"%s\", which claims its columns",
							RelationGetRelationName(rel), get_rel_name(m.declared)),
					 errhint("Name table \"%s\" in claims_cell.set_constraints.", get_rel_name(m.declared))));
		if (attnum != 0 && m.attnum != attnum)
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
			cell_record_destroy(rel, lfirst(lc), tuple);
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
