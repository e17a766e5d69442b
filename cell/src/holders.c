/*-------------------------------------------------------------------------
 *
 * holders.c
 *	  The rows of a claimed column that hold a value: counted at COMMIT to
 *	  refuse two rows of one value, and listed by reconcile() to claim a
 *	  lost value again for its row.
 *
 * The lookups run as the table's owner, in a security-restricted
 * operation under a pinned search path, as ANALYZE and REFRESH
 * MATERIALIZED VIEW run a table's code: the column's type, its equality
 * operator, a domain's checks and casts are the owner's to define, and
 * must never run with the privileges of the extension's owner or of
 * whoever calls reconcile(). A value is matched with the type's equality
 * (an index on the column serves it), then by its text byte for byte.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_index.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(claims_cell_rows_holding);
PG_FUNCTION_INFO_V1(claims_cell_rows_holding_key);

/* What an index on a table says about one of its columns. */
typedef enum CellColumnIndex
{
	CELL_INDEX_NONE,			/* no index leads with the column */
	CELL_INDEX_PLAIN,			/* one leads with it */
	CELL_INDEX_UNIQUE			/* a valid unique index on it alone, not partial */
} CellColumnIndex;

/* The best index of a table on a column. */
static CellColumnIndex
cell_column_index(Relation rel, AttrNumber attnum)
{
	List	   *indexes = RelationGetIndexList(rel);
	CellColumnIndex best = CELL_INDEX_NONE;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index idx;

		if (!HeapTupleIsValid(tup))
			continue;
		idx = (Form_pg_index) GETSTRUCT(tup);
		if (idx->indisvalid && idx->indnkeyatts >= 1 && idx->indkey.values[0] == attnum)
		{
			if (idx->indisunique && idx->indnkeyatts == 1 &&
				heap_attisnull(tup, Anum_pg_index_indpred, NULL) &&
				heap_attisnull(tup, Anum_pg_index_indexprs, NULL))
				best = CELL_INDEX_UNIQUE;
			else if (best == CELL_INDEX_NONE)
				best = CELL_INDEX_PLAIN;
		}
		ReleaseSysCache(tup);
	}
	list_free(indexes);
	return best;
}

/*
 * " WHERE" condition of the rows whose column holds $1 (text): with typed,
 * the column type's equality first (an index on the column serves it),
 * which needs $1 to be a value of that type; without, the text alone.
 */
static void
cell_holders_where(StringInfo sql, Form_pg_attribute att, bool typed)
{
	TypeCacheEntry *tc = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR);
	const char *qcol = quote_identifier(NameStr(att->attname));

	appendStringInfoString(sql, " WHERE ");
	if (typed && OidIsValid(tc->eq_opr))
	{
		HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(tc->eq_opr));
		Form_pg_operator op;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for operator %u", tc->eq_opr);
		op = (Form_pg_operator) GETSTRUCT(tup);
		appendStringInfo(sql, "t.%s OPERATOR(%s.%s) CAST($1 AS %s) AND ", qcol,
						 quote_identifier(get_namespace_name(op->oprnamespace)),
						 NameStr(op->oprname),
						 format_type_extended(att->atttypid, att->atttypmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
		ReleaseSysCache(tup);
	}
	appendStringInfo(sql, "CAST(t.%s AS pg_catalog.text) COLLATE pg_catalog.\"C\""
					 " OPERATOR(pg_catalog.=) $1", qcol);
}

/*
 * The table whose rows are searched, as alias t: a plain table ONLY (an
 * inheritance child left from before 1.5 is no holder of its parent's
 * claims), a partitioned one with its partitions.
 */
static void
cell_holders_from(StringInfo sql, Relation rel)
{
	appendStringInfo(sql, "%s%s t",
					 rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE ? "" : "ONLY ",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
}

/* Become the table's owner for its code (undone by cell_holders_leave). */
static void
cell_holders_enter(Oid owner, Oid *save_user, int *save_sec, int *save_nestlevel)
{
	GetUserIdAndSecContext(save_user, save_sec);
	*save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(owner, *save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/* Back to the caller. */
static void
cell_holders_leave(Oid save_user, int save_sec, int save_nestlevel)
{
	SetUserIdAndSecContext(save_user, save_sec);
	AtEOXact_GUC(true, save_nestlevel);
}

/*
 * Prepare (inside SPI_connect) the count of the rows of a claimed column
 * holding a value, for PRE_COMMIT; NULL when there is nothing to look for
 * there: a unique index forbids two rows of a value already, and a column
 * with no index at all would be scanned once per value (and, under
 * SERIALIZABLE, locked whole), so it is left to the store and verify().
 * *owner is the table's owner, who runs it.
 */
SPIPlanPtr
cell_holders_count_plan(Oid relid, AttrNumber attnum, Oid *owner)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Form_pg_attribute att;
	StringInfoData sql;
	SPIPlanPtr	plan = NULL;
	Oid			argtype = TEXTOID;
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;

	*owner = rel->rd_rel->relowner;
	if (attnum <= 0 || attnum > RelationGetDescr(rel)->natts ||
		TupleDescAttr(RelationGetDescr(rel), attnum - 1)->attisdropped ||
		cell_column_index(rel, attnum) != CELL_INDEX_PLAIN)
	{
		table_close(rel, NoLock);
		return NULL;
	}
	att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.count(*) FROM ");
	cell_holders_from(&sql, rel);
	cell_holders_where(&sql, att, true);
	cell_holders_enter(*owner, &save_user, &save_sec, &save_nestlevel);
	plan = SPI_prepare(sql.data, 1, &argtype);
	cell_holders_leave(save_user, save_sec, save_nestlevel);
	if (plan == NULL)
		elog(ERROR, "claims_cell: preparing \"%s\" failed: %s", sql.data,
			 SPI_result_code_string(SPI_result));
	table_close(rel, NoLock);
	return plan;
}

/*
 * Run a count plan for a value (inside SPI_connect) as the table's owner,
 * under the active snapshot: the caller's, taken now (under REPEATABLE
 * READ the transaction's own would still show rows deleted since, whose
 * claims are gone).
 */
int64
cell_holders_count(SPIPlanPtr plan, Oid owner, const char *value)
{
	Datum		arg = CStringGetTextDatum(value);
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;
	int			ret;
	bool		isnull;
	int64		n;

	cell_holders_enter(owner, &save_user, &save_sec, &save_nestlevel);
	ret = SPI_execute_plan(plan, &arg, NULL, true, 1);
	cell_holders_leave(save_user, save_sec, save_nestlevel);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "claims_cell: looking for rows holding a claimed value failed: %s",
			 SPI_result_code_string(ret));
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return n;
}

/*
 * The SELECT of the rows of a claimed column holding $1 (text), each with
 * its source id as the store spells it and its subject, from the table
 * (cell_holders_from), for a caller that appends what it needs (limits, locks); typed
 * as for cell_holders_where.
 */
static void
cell_holders_select(StringInfo sql, Relation rel, AttrNumber attnum,
					AttrNumber subject_attnum, const CellSourceKey *source, bool typed)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (attnum <= 0 || attnum > desc->natts || TupleDescAttr(desc, attnum - 1)->attisdropped ||
		subject_attnum <= 0 || subject_attnum > desc->natts)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("claimed attribute %d of table \"%s\" does not exist", attnum,
						RelationGetRelationName(rel))));
	appendStringInfoString(sql, "SELECT ");
	cell_source_id_sql(sql, desc, source, "t", RelationGetRelationName(rel));
	appendStringInfo(sql, ", CAST(t.%s AS pg_catalog.int8) FROM ",
					 quote_identifier(NameStr(TupleDescAttr(desc, subject_attnum - 1)->attname)));
	cell_holders_from(sql, rel);
	cell_holders_where(sql, TupleDescAttr(desc, attnum - 1), typed);
}

/*
 * Run one of those SELECTs for a value (inside SPI_connect) as the table's
 * owner, at most tcount rows (0: all), into SPI_tuptable: under snapshot
 * when one is given (SPI would otherwise take the transaction's own for a
 * statement that locks rows), else as SPI runs any statement.
 */
static void
cell_holders_run(Oid owner, const char *sql, const char *value, long tcount, Snapshot snapshot)
{
	Oid			argtype = TEXTOID;
	Datum		arg = CStringGetTextDatum(value);
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;
	int			ret;

	cell_holders_enter(owner, &save_user, &save_sec, &save_nestlevel);
	if (snapshot != NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql, 1, &argtype);

		if (plan == NULL)
			elog(ERROR, "claims_cell: preparing \"%s\" failed: %s", sql,
				 SPI_result_code_string(SPI_result));
		ret = SPI_execute_snapshot(plan, &arg, NULL, snapshot, InvalidSnapshot, false, false, tcount);
		SPI_freeplan(plan);
	}
	else
		ret = SPI_execute_with_args(sql, 1, &argtype, &arg, NULL, false, tcount);
	cell_holders_leave(save_user, save_sec, save_nestlevel);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
}

/*
 * Whether a column has a valid unique index on it alone (not partial): no
 * second row of its table can hold one of its values. False for a table
 * that is gone.
 */
bool
cell_column_is_unique(Oid relid, AttrNumber attnum)
{
	Relation	rel = try_table_open(relid, AccessShareLock);
	bool		unique;

	if (rel == NULL)
		return false;
	unique = cell_column_index(rel, attnum) == CELL_INDEX_UNIQUE;
	table_close(rel, AccessShareLock);
	return unique;
}

/*
 * The first row of a claimed column that holds a value and has a subject
 * (a row the trigger would claim it for), under snapshot, run as the
 * table's owner inside the caller's SPI_connect, and locked FOR
 * SHARE (NOWAIT: 55P03 when a writer holds it) until the transaction ends,
 * so that it cannot go before a lease made for it is committed. Its source
 * id as the store spells it and its subject; false when no row holds the
 * value or the table is gone. The value came from a column of type
 * value_type: the column's own equality is used only when it has that
 * type, since the value may be no value of another (text against integer).
 * Rows of the partition excluded (one a TRUNCATE empties) do not count.
 */
bool
cell_holder_find(Oid relid, AttrNumber attnum, AttrNumber subject_attnum,
				 const CellSourceKey *source, const char *value, Oid value_type,
				 Oid excluded, Snapshot snapshot, char **source_id, int *source_len,
				 int64 *subject)
{
	Relation	rel = try_table_open(relid, AccessShareLock);
	Oid			owner;
	StringInfoData sql;
	bool		isnull;
	bytea	   *src;

	if (rel == NULL)
		return false;
	owner = rel->rd_rel->relowner;
	initStringInfo(&sql);
	cell_holders_select(&sql, rel, attnum, subject_attnum, source,
						attnum <= RelationGetDescr(rel)->natts &&
						TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid == value_type);
	if (OidIsValid(excluded))
		appendStringInfo(&sql, " AND t.tableoid OPERATOR(pg_catalog.<>) CAST(%u AS pg_catalog.oid)", excluded);
	appendStringInfo(&sql, " AND CAST(t.%s AS pg_catalog.int8) OPERATOR(pg_catalog.<>) 0"
					 " LIMIT 1 FOR SHARE OF t NOWAIT",
					 quote_identifier(NameStr(TupleDescAttr(RelationGetDescr(rel),
															 subject_attnum - 1)->attname)));
	table_close(rel, NoLock);

	cell_holders_run(owner, sql.data, value, 1, snapshot);
	if (SPI_processed == 0)
		return false;
	src = DatumGetByteaPP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*source_len = VARSIZE_ANY_EXHDR(src);
	*source_id = palloc(*source_len);
	memcpy(*source_id, VARDATA_ANY(src), *source_len);
	*subject = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return true;
}

/*
 * The rows of a claimed column holding a value, each with its source id as
 * the store spells it and its subject, locked FOR SHARE (NOWAIT: 55P03 when
 * a writer holds one) until the transaction ends, so none can go before a
 * claim made for it is committed; run as the table's owner, into the SRF's
 * tuplestore. For reconcile()'s claim_again().
 */
static void
cell_rows_holding(FunctionCallInfo fcinfo, const CellSourceKey *source)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = PG_GETARG_OID(0);
	AttrNumber	attnum = PG_GETARG_INT16(1);
	char	   *value = text_to_cstring(PG_GETARG_TEXT_PP(2));
	AttrNumber	subject_attnum = PG_GETARG_INT16(3);
	Relation	rel;
	Oid			owner;
	StringInfoData sql;

	InitMaterializedSRF(fcinfo, 0);
	rel = table_open(relid, AccessShareLock);
	owner = rel->rd_rel->relowner;
	initStringInfo(&sql);
	cell_holders_select(&sql, rel, attnum, subject_attnum, source, true);
	appendStringInfoString(&sql, " FOR SHARE OF t NOWAIT");
	table_close(rel, NoLock);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	cell_holders_run(owner, sql.data, value, 0, NULL);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[2];
		bool		nulls[2];

		values[0] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &nulls[0]);
		values[1] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &nulls[1]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	SPI_finish();
}

/*
 * claims_cell.rows_holding(table regclass, attnum smallint, value text,
 * subject_attnum smallint, source_attnums smallint[]) RETURNS TABLE
 * (source_id bytea, subject bigint), from 1.5: the source key's columns.
 */
Datum
claims_cell_rows_holding_key(PG_FUNCTION_ARGS)
{
	CellSourceKey source;

	cell_source_key_from_array(PG_GETARG_ARRAYTYPE_P(4), &source);
	cell_rows_holding(fcinfo, &source);
	return (Datum) 0;
}

/*
 * The same before 1.5, with source_attnum smallint: a key of one column
 * (a database whose extension is not updated yet runs it).
 */
Datum
claims_cell_rows_holding(PG_FUNCTION_ARGS)
{
	CellSourceKey source;

	source.n = 1;
	source.attnums[0] = PG_GETARG_INT16(4);
	cell_rows_holding(fcinfo, &source);
	return (Datum) 0;
}
