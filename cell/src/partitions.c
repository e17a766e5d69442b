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
#include "catalog/pg_type.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

/*
 * Mapped columns of a row trigger, by trigger oid. An invalidation of a
 * table marks the entries of its triggers (all, for a full reset) stale;
 * a stale entry is computed again at its next lookup. The hash is never
 * freed under a caller: invalidations arrive whenever a lock is taken,
 * also while an entry is being computed.
 */
typedef struct CellTriggerMapEntry
{
	Oid			tgoid;			/* hash key */
	Oid			relid;			/* the trigger's table */
	bool		stale;
	CellTriggerColumns columns;
} CellTriggerMapEntry;

static HTAB *cell_trigger_map = NULL;

/* Relcache callback: mark the entries of a table's triggers stale. */
static void
cell_trigger_map_invalidate(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	CellTriggerMapEntry *e;

	if (cell_trigger_map == NULL)
		return;
	hash_seq_init(&seq, cell_trigger_map);
	while ((e = hash_seq_search(&seq)) != NULL)
		if (!OidIsValid(relid) || e->relid == relid || e->columns.declared == relid)
			e->stale = true;
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
 * changes are recorded for, into *out.
 */
void
cell_trigger_columns(Relation rel, Trigger *trigger, CellTriggerColumns *out)
{
	CellTriggerMapEntry *e;
	CellTriggerColumns m;
	CellSourceKey key;
	bool		found;
	Oid			tgoid;
	Oid			tgfoid;
	char	   *tgname;
	AttrNumber	subject_attnum;

	if (cell_trigger_map == NULL)
	{
		HASHCTL		ctl;
		static bool registered = false;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(CellTriggerMapEntry);
		ctl.hcxt = TopMemoryContext;
		cell_trigger_map = hash_create("claims_cell trigger columns", 64, &ctl,
									   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		if (!registered)
		{
			CacheRegisterRelcacheCallback(cell_trigger_map_invalidate, (Datum) 0);
			registered = true;
		}
	}
	e = hash_search(cell_trigger_map, &trigger->tgoid, HASH_FIND, NULL);
	if (e != NULL && !e->stale)
	{
		*out = e->columns;
		return;
	}

	/*
	 * everything read from the trigger first: the locks cell_declared_table
	 * takes process invalidations, which may rebuild rel's trigger array
	 */
	cell_source_key_parse(trigger->tgargs[CELL_TRIGGER_ARG_SOURCE_KEY], &key);
	tgoid = trigger->tgoid;
	tgfoid = trigger->tgfoid;
	tgname = pstrdup(trigger->tgname);
	m.declared_attnum = cell_attnum_arg(trigger->tgargs[CELL_TRIGGER_ARG_ATTNUM]);
	subject_attnum = cell_attnum_arg(trigger->tgargs[CELL_TRIGGER_ARG_SUBJECT_ATTNUM]);
	m.declared = cell_declared_table(RelationGetRelid(rel), tgname, tgfoid);
	pfree(tgname);
	if (m.declared == RelationGetRelid(rel))
	{
		m.attnum = m.declared_attnum;
		m.subject_attnum = subject_attnum;
		m.source = key;
	}
	else
	{
		m.attnum = cell_map_attnum(m.declared, m.declared_attnum, rel);
		m.subject_attnum = cell_map_attnum(m.declared, subject_attnum, rel);
		m.source.n = key.n;
		for (int i = 0; i < key.n; i++)
			m.source.attnums[i] = cell_map_attnum(m.declared, key.attnums[i], rel);
	}
	/* entered once complete: an error above leaves no half entry */
	e = hash_search(cell_trigger_map, &tgoid, HASH_ENTER, &found);
	e->relid = RelationGetRelid(rel);
	e->columns = m;
	e->stale = false;
	*out = m;
}

/*
 * The next collect() row trigger of rel at or after trigger *i, with its
 * mapped columns in *m; NULL after the last. Loop with
 * i = 0; while ((t = cell_next_claim_trigger(rel, collect, &i, &m))) ...
 */
Trigger *
cell_next_claim_trigger(Relation rel, Oid collect, int *i, CellTriggerColumns *m)
{
	for (; rel->trigdesc && *i < rel->trigdesc->numtriggers; (*i)++)
	{
		Trigger    *t = &rel->trigdesc->triggers[*i];

		if (t->tgfoid == collect && t->tgnargs >= CELL_TRIGGER_NARGS)
		{
			(*i)++;
			cell_trigger_columns(rel, t, m);
			return t;
		}
	}
	return NULL;
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
 * The owner of a claimed partitioned table may execute collect(): PostgreSQL
 * checks that privilege when it clones the row trigger to a partition the
 * owner creates or attaches (CREATE TABLE ... PARTITION OF in a migration).
 * Inside SPI_connect, as the extension's owner.
 */
static void
cell_grant_collect(Relation rel, Oid collect)
{
	Oid			owner = rel->rd_rel->relowner;

#if PG_VERSION_NUM >= 160000
	if (object_aclcheck(ProcedureRelationId, collect, owner, ACL_EXECUTE) == ACLCHECK_OK)
#else
	if (pg_proc_aclcheck(collect, owner, ACL_EXECUTE) == ACLCHECK_OK)
#endif
		return;
	cell_spi_utility(psprintf("GRANT EXECUTE ON FUNCTION claims_cell.collect() TO %s",
							  quote_identifier(GetUserNameFromId(owner, false))));
}

/* Whether a partition below a partitioned table has claimed columns of its own. */
static bool
cell_partition_claimed(Oid relid, Oid collect)
{
	List	   *members = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;
	bool		claimed = false;

	foreach(lc, members)
	{
		Relation	rel;

		if (lfirst_oid(lc) == relid || claimed)
			continue;
		/* listed without a lock: a partition may be gone since */
		rel = try_relation_open(lfirst_oid(lc), AccessShareLock);
		if (rel == NULL)
			continue;
		for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
			claimed |= rel->trigdesc->triggers[i].tgfoid == collect;
		relation_close(rel, AccessShareLock);
	}
	list_free(members);
	return claimed;
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
	bool		claimed_below;
	List	   *columns = NIL;
	List	   *declared = NIL;	/* the declared table of each of columns */
	CellTriggerColumns m;
	int			i = 0;

	if (rel == NULL)
		return;
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
	{
		relation_close(rel, AccessShareLock);
		return;
	}
	while (cell_next_claim_trigger(rel, collect, &i, &m) != NULL)
	{
		char	   *column;
		ListCell   *lc;
		ListCell   *lc2;

		claimed = true;
		column = get_attname(relid, m.attnum, false);
		forboth(lc, columns, lc2, declared)
			if (strcmp(lfirst(lc), column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("column \"%s\" of table \"%s\" would be claimed twice",
								column, RelationGetRelationName(rel)),
						 errdetail("Tables \"%s\" and \"%s\" both claim it.",
								   get_rel_name(lfirst_oid(lc2)), get_rel_name(m.declared)),
						 errhint("Unclaim the partition's column with claims_cell.unclaim_column first.")));
		columns = lappend(columns, column);
		declared = lappend_oid(declared, m.declared);
	}
	qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));
	if (claimed && rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		cell_grant_collect(rel, collect);
	/* a statement naming an unclaimed parent ends there: claim a partition's changes then */
	claimed_below = !claimed && rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE &&
		cell_partition_claimed(relid, collect);
	if ((claimed || claimed_below) && with_mode && !cell_has_trigger(rel, "claims_cell_statement"))
		cell_spi_utility(psprintf("CREATE TRIGGER claims_cell_statement AFTER INSERT OR UPDATE OR DELETE ON %s"
								  " FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.claim_statement()",
								  qualified));
	if (claimed && !cell_has_trigger(rel, "claims_cell_truncate"))
		cell_spi_utility(psprintf("CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON %s"
								  " FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.%s()",
								  qualified, with_mode ? "collect_truncate" : "refuse_truncate"));
	/* a detached partition, or a parent with no claimed partition left: as unclaim_column leaves a table */
	if (!claimed && !claimed_below && cell_has_trigger(rel, "claims_cell_statement"))
		cell_spi_utility(psprintf("DROP TRIGGER claims_cell_statement ON %s", qualified));
	if (!claimed && cell_has_trigger(rel, "claims_cell_truncate"))
		cell_spi_utility(psprintf("DROP TRIGGER claims_cell_truncate ON %s", qualified));
	relation_close(rel, AccessShareLock);
}

/*
 * Raise 42710 when a partition below a partitioned table claims a column
 * of that name on its own: the parent's row trigger, cloned there, would
 * claim it a second time. Before anything is written.
 */
void
cell_check_free_in_partitions(Oid relid, const char *column, Oid collect)
{
	List	   *members = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		/* listed without a lock: a partition may be gone since */
		Relation	rel = try_relation_open(lfirst_oid(lc), AccessShareLock);
		CellTriggerColumns m;
		int			i = 0;

		if (rel == NULL)
			continue;

		while (cell_next_claim_trigger(rel, collect, &i, &m) != NULL)
		{
			if (strcmp(get_attname(RelationGetRelid(rel), m.attnum, false), column) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_OBJECT),
						 errmsg("column \"%s\" of partition \"%s\" is claimed already",
								column, RelationGetRelationName(rel)),
						 errdetail("Claimed through table \"%s\"; the partitioned table's claim would claim it twice.",
								   get_rel_name(m.declared)),
						 errhint("Unclaim the partition's column with claims_cell.unclaim_column first.")));
		}
		relation_close(rel, AccessShareLock);
	}
	list_free(members);
}

/* Sync the triggers of a table, of every partition below it and of its parents. */
void
cell_sync_tree_triggers(Oid relid, Oid collect)
{
	List	   *members = find_all_inheritors(relid, NoLock, NULL);
	ListCell   *lc;

	if (get_rel_relispartition(relid))
		members = list_concat(members, get_partition_ancestors(relid));
	foreach(lc, members)
		cell_sync_table_triggers(lfirst_oid(lc), collect);
	list_free(members);
}

/*
 * The partitions an ALTER TABLE attaches or detaches (the command's own
 * objects name only the parent); *detached gets those it detaches.
 */
List *
cell_partitions_named(Node *parsetree, List **detached)
{
	List	   *out = NIL;
	ListCell   *lc;

	*detached = NIL;
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

			if (!OidIsValid(part))
				continue;
			out = lappend_oid(out, part);
			if (cmd->subtype != AT_AttachPartition)
				*detached = lappend_oid(*detached, part);
		}
	}
	return out;
}

/*
 * Record (or, attached again, forget) the partitions a command detached
 * from a claimed partitioned table: their values stay claimed, and
 * verify() of that table leaves those their rows hold alone. Inside
 * SPI_connect, as the extension's owner.
 */
void
cell_note_detached(Node *parsetree, List *named, List *detached, Oid collect)
{
	Oid			parent;
	ListCell   *lc;
	bool		claimed = false;
	Relation	rel;

	if (named == NIL)
		return;
	parent = RangeVarGetRelid(((AlterTableStmt *) parsetree)->relation, NoLock, true);
	if (!OidIsValid(parent) || (rel = try_relation_open(parent, AccessShareLock)) == NULL)
		return;
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
		claimed |= rel->trigdesc->triggers[i].tgfoid == collect;
	relation_close(rel, AccessShareLock);
	foreach(lc, named)
	{
		Oid			types[2] = {REGCLASSOID, REGCLASSOID};
		Datum		values[2] = {ObjectIdGetDatum(lfirst_oid(lc)), ObjectIdGetDatum(parent)};
		bool		gone = list_member_oid(detached, lfirst_oid(lc));
		int			ret;

		if (gone && !claimed)
			continue;
		ret = SPI_execute_with_args(gone
									? "INSERT INTO claims_cell.detached_partitions (table_name, partitioned_table)"
									" VALUES ($1, $2) ON CONFLICT (table_name) DO UPDATE"
									" SET partitioned_table = excluded.partitioned_table, detached_at = pg_catalog.now()"
									: "DELETE FROM claims_cell.detached_partitions WHERE table_name OPERATOR(pg_catalog.=) $1",
									gone ? 2 : 1, types, values, NULL, false, 0);
		if (ret != SPI_OK_INSERT && ret != SPI_OK_DELETE)
			elog(ERROR, "claims_cell: recording a detached partition failed: %s", SPI_result_code_string(ret));
	}
}
