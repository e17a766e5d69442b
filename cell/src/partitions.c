/*-------------------------------------------------------------------------
 *
 * partitions.c
 *	  Claimed partitioned tables: which declaration a partition's row
 *	  trigger claims for, and the statement and TRUNCATE triggers every
 *	  partition needs.
 *
 * claim_column on a partitioned table creates its row trigger there;
 * PostgreSQL clones it to every partition, present and future (CREATE
 * TABLE ... PARTITION OF, ATTACH PARTITION), with the same name and
 * arguments, and drops the clones at DETACH PARTITION. The arguments are
 * attribute numbers of the declared table; a partition's own numbers may
 * differ (dropped columns, a table attached with another column order),
 * so they are mapped by column name (partitions share their parent's
 * names). Statement and TRUNCATE triggers are not cloned: PostgreSQL fires
 * statement triggers only of the table a statement names, so each member
 * of the tree gets its own (claim_column, and the event trigger after a
 * command that made or attached a partition), and loses them at DETACH.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/* Mapped columns of a row trigger, by trigger oid (reset on any relcache change). */
static HTAB *cell_trigger_map = NULL;

/* Forget every mapping: a table of some tree changed. */
static void
cell_trigger_map_reset(Datum arg, Oid relid)
{
	if (cell_trigger_map != NULL)
	{
		hash_destroy(cell_trigger_map);
		cell_trigger_map = NULL;
	}
}

/*
 * The table whose declaration a trigger of relid was cloned from: the
 * topmost ancestor with a trigger of that name calling collect(), or
 * relid itself.
 */
static Oid
cell_declared_table(Oid relid, const char *tgname, Oid collect)
{
	List	   *ancestors;
	ListCell   *lc;
	Oid			declared = relid;

	if (!get_rel_relispartition(relid))
		return relid;
	ancestors = get_partition_ancestors(relid);
	foreach(lc, ancestors)
	{
		Relation	trig = table_open(TriggerRelationId, AccessShareLock);
		ScanKeyData keys[2];
		SysScanDesc scan;
		HeapTuple	tup;

		ScanKeyInit(&keys[0], Anum_pg_trigger_tgrelid, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(lfirst_oid(lc)));
		ScanKeyInit(&keys[1], Anum_pg_trigger_tgname, BTEqualStrategyNumber, F_NAMEEQ,
					CStringGetDatum(tgname));
		scan = systable_beginscan(trig, TriggerRelidNameIndexId, true, NULL, 2, keys);
		tup = systable_getnext(scan);
		if (HeapTupleIsValid(tup) && ((Form_pg_trigger) GETSTRUCT(tup))->tgfoid == collect)
			declared = lfirst_oid(lc);
		systable_endscan(scan);
		table_close(trig, AccessShareLock);
	}
	list_free(ancestors);
	return declared;
}

/* The attribute number in relid of the column attnum of declared, or 42703. */
static AttrNumber
cell_map_attnum(Oid declared, AttrNumber attnum, Relation rel)
{
	char	   *name = get_attname(declared, attnum, true);
	AttrNumber	mapped = name ? get_attnum(RelationGetRelid(rel), name) : InvalidAttrNumber;

	if (mapped == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("claimed attribute %d of table \"%s\" does not exist in partition \"%s\"",
						attnum, get_rel_name(declared), RelationGetRelationName(rel)),
				 errhint("Claim the column again with claims_cell.claim_column.")));
	return mapped;
}

/* Parse an attribute number argument of a collect() trigger. */
static AttrNumber
cell_attnum_arg(const char *arg)
{
	char	   *end;
	long		attnum = strtol(arg, &end, 10);

	if (*end != '\0' || attnum <= 0 || attnum > MaxAttrNumber)
		elog(ERROR, "claims_cell: malformed attribute number argument \"%s\"", arg);
	return (AttrNumber) attnum;
}

/*
 * The columns a collect() row trigger of rel claims (arguments 1, 4 and
 * 6), in rel's attribute numbers, and the declared table and column its
 * changes are recorded for.
 */
const CellTriggerColumns *
cell_trigger_columns(Relation rel, Trigger *trigger)
{
	CellTriggerColumns *m;
	bool		found;
	CellSourceKey key;

	if (cell_trigger_map == NULL)
	{
		HASHCTL		ctl;
		static bool registered = false;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(CellTriggerColumns);
		ctl.hcxt = TopMemoryContext;
		cell_trigger_map = hash_create("claims_cell trigger columns", 64, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (!registered)
		{
			CacheRegisterRelcacheCallback(cell_trigger_map_reset, (Datum) 0);
			registered = true;
		}
	}
	m = hash_search(cell_trigger_map, &trigger->tgoid, HASH_FIND, NULL);
	if (m != NULL)
		return m;

	cell_source_key_parse(trigger->tgargs[CELL_TRIGGER_ARG_SOURCE_KEY], &key);
	{
		Oid			declared = cell_declared_table(RelationGetRelid(rel), trigger->tgname,
												   trigger->tgfoid);
		CellTriggerColumns tmp;

		tmp.tgoid = trigger->tgoid;
		tmp.declared = declared;
		tmp.declared_attnum = cell_attnum_arg(trigger->tgargs[CELL_TRIGGER_ARG_ATTNUM]);
		if (declared == RelationGetRelid(rel))
		{
			tmp.attnum = tmp.declared_attnum;
			tmp.subject_attnum = cell_attnum_arg(trigger->tgargs[CELL_TRIGGER_ARG_SUBJECT_ATTNUM]);
			tmp.source = key;
		}
		else
		{
			tmp.attnum = cell_map_attnum(declared, tmp.declared_attnum, rel);
			tmp.subject_attnum = cell_map_attnum(declared, cell_attnum_arg(trigger->tgargs[CELL_TRIGGER_ARG_SUBJECT_ATTNUM]), rel);
			tmp.source.n = key.n;
			for (int i = 0; i < key.n; i++)
				tmp.source.attnums[i] = cell_map_attnum(declared, key.attnums[i], rel);
		}
		/* entered only once complete: an error above leaves no half entry */
		m = hash_search(cell_trigger_map, &trigger->tgoid, HASH_ENTER, &found);
		*m = tmp;
	}
	return m;
}

/* Whether a table has a trigger of that name. */
static bool
cell_has_trigger(Relation rel, const char *name)
{
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
		if (strcmp(rel->trigdesc->triggers[i].tgname, name) == 0)
			return true;
	return false;
}

/* Whether the extension's schema is 1.4 or later: it has collect_truncate(). */
static bool
cell_schema_has_modes(void)
{
	Oid			nsp = get_namespace_oid("claims_cell", false);

	return OidIsValid(GetSysCacheOid3(PROCNAMEARGSNSP, Anum_pg_proc_oid, CStringGetDatum("collect_truncate"),
									  PointerGetDatum(buildoidvector(NULL, 0)), ObjectIdGetDatum(nsp)));
}

/* Run one utility statement through SPI (connected) or fail. */
static void
cell_spi_utility(const char *sql)
{
	int			ret = SPI_execute(sql, false, 0);

	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "claims_cell: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
}

/*
 * Give a table the statement and TRUNCATE triggers its claimed columns
 * need, or take them away when it has none any more (a partition
 * detached); and refuse two row triggers of one column on it (a partition
 * claiming a column its new parent claims too). Inside SPI_connect, as
 * the extension's owner. Before the 1.4 schema (no claim modes) there is
 * no statement trigger and TRUNCATE is refused.
 */
void
cell_sync_table_triggers(Oid relid, Oid collect)
{
	bool		with_mode = cell_schema_has_modes();
	Relation	rel = try_relation_open(relid, AccessShareLock);
	char	   *qualified;
	bool		claimed = false;
	List	   *columns = NIL;

	if (rel == NULL)
		return;
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
	{
		relation_close(rel, AccessShareLock);
		return;
	}
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *t = &rel->trigdesc->triggers[i];
		const CellTriggerColumns *m;
		char	   *column;
		ListCell   *lc;

		if (t->tgfoid != collect || t->tgnargs < CELL_TRIGGER_NARGS)
			continue;
		claimed = true;
		m = cell_trigger_columns(rel, t);
		column = get_attname(relid, m->attnum, false);
		foreach(lc, columns)
			if (strcmp(lfirst(lc), column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("column \"%s\" of table \"%s\" would be claimed twice",
								column, RelationGetRelationName(rel)),
						 errdetail("Table \"%s\" claims it, and so does table \"%s\" it is a partition of.",
								   RelationGetRelationName(rel), get_rel_name(m->declared)),
						 errhint("Unclaim the partition's column with claims_cell.unclaim_column first.")));
		columns = lappend(columns, column);
	}
	qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));
	if (claimed && with_mode && !cell_has_trigger(rel, "claims_cell_statement"))
		cell_spi_utility(psprintf("CREATE TRIGGER claims_cell_statement AFTER INSERT OR UPDATE OR DELETE ON %s"
								  " FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.claim_statement()",
								  qualified));
	if (claimed && !cell_has_trigger(rel, "claims_cell_truncate"))
		cell_spi_utility(psprintf("CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON %s"
								  " FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.%s()",
								  qualified, with_mode ? "collect_truncate" : "refuse_truncate"));
	if (!claimed &&
		(cell_has_trigger(rel, "claims_cell_statement") || cell_has_trigger(rel, "claims_cell_truncate")))
	{
		/* a detached partition: as unclaim_column leaves a table */
		cell_spi_utility(psprintf("DROP TRIGGER IF EXISTS claims_cell_statement ON %s", qualified));
		cell_spi_utility(psprintf("DROP TRIGGER IF EXISTS claims_cell_truncate ON %s", qualified));
	}
	relation_close(rel, AccessShareLock);
}

/* Sync the triggers of a table and of every partition below it. */
void
cell_sync_tree_triggers(Oid relid, Oid collect)
{
	List	   *members = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
		cell_sync_table_triggers(lfirst_oid(lc), collect);
	list_free(members);
}

/*
 * The partitions an ALTER TABLE attaches or detaches (the command's own
 * objects name only the parent).
 */
List *
cell_partitions_named(Node *parsetree)
{
	List	   *out = NIL;
	ListCell   *lc;

	if (parsetree == NULL || !IsA(parsetree, AlterTableStmt))
		return NIL;
	foreach(lc, ((AlterTableStmt *) parsetree)->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if ((cmd->subtype == AT_AttachPartition || cmd->subtype == AT_DetachPartition ||
			 cmd->subtype == AT_DetachPartitionFinalize) &&
			cmd->def && IsA(cmd->def, PartitionCmd))
		{
			Oid			part = RangeVarGetRelid(((PartitionCmd *) cmd->def)->name, NoLock, true);

			if (OidIsValid(part))
				out = lappend_oid(out, part);
		}
	}
	return out;
}
