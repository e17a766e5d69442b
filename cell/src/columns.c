/*-------------------------------------------------------------------------
 *
 * columns.c
 *	  configure, claim_column, set_claiming and unclaim_column: the
 *	  declarations of what this cell claims, and their triggers.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "utils/acl.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "access/genam.h"
#include "access/relation.h"
#include "commands/event_trigger.h"
#include "utils/fmgroids.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(claims_cell_configure);
PG_FUNCTION_INFO_V1(claims_cell_claim_column);
PG_FUNCTION_INFO_V1(claims_cell_set_claiming);
PG_FUNCTION_INFO_V1(claims_cell_unclaim_column);
PG_FUNCTION_INFO_V1(claims_cell_follow_table_ddl);

#define CELL_TRIGGER_PREFIX "claims_cell_"

/* Raise 22004 for a NULL argument. */
static void
cell_require_args(FunctionCallInfo fcinfo, int n)
{
	for (int i = 0; i < n; i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %d of %s must not be NULL", i + 1,
							get_func_name(fcinfo->flinfo->fn_oid))));
}

/* Run one statement through SPI or fail. */
static void
cell_spi(const char *sql, int nargs, Oid *types, Datum *values, int expected)
{
	int			ret = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (ret != expected)
		elog(ERROR, "claims_cell: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
}

/*
 * claims_cell.configure(server_name name, cell_id bigint): the store's
 * server (of the claims_cell_store wrapper) and this cell's id, with what
 * identifies this database (from 1.4): its cluster's system identifier and
 * its oid, which a copy does not share.
 */
Datum
claims_cell_configure(PG_FUNCTION_ARGS)
{
	char	   *server;
	int64		cell_id;
	Oid			types[4] = {NAMEOID, INT8OID, INT8OID, OIDOID};
	Datum		values[4];

	cell_require_args(fcinfo, 2);
	server = NameStr(*PG_GETARG_NAME(0));
	cell_id = PG_GETARG_INT64(1);
	if (cell_id <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cell_id must be greater than 0, not " INT64_FORMAT, cell_id)));
	(void) cell_server_oid(server, false);

	values[0] = PG_GETARG_DATUM(0);
	values[1] = Int64GetDatum(cell_id);
	values[2] = Int64GetDatum((int64) GetSystemIdentifier());
	values[3] = ObjectIdGetDatum(MyDatabaseId);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	if (get_attnum(get_relname_relid("configuration", get_namespace_oid("claims_cell", false)),
				   "system_identifier") != InvalidAttrNumber)
		cell_spi("INSERT INTO claims_cell.configuration (server_name, cell_id, system_identifier, database_oid)"
				 " VALUES ($1, $2, $3, $4)"
				 " ON CONFLICT (singleton) DO UPDATE SET server_name = excluded.server_name,"
				 " cell_id = excluded.cell_id, system_identifier = excluded.system_identifier,"
				 " database_oid = excluded.database_oid, updated_at = pg_catalog.now()",
				 4, types, values, SPI_OK_INSERT);
	else
		cell_spi("INSERT INTO claims_cell.configuration (server_name, cell_id) VALUES ($1, $2)"
				 " ON CONFLICT (singleton) DO UPDATE SET server_name = excluded.server_name,"
				 " cell_id = excluded.cell_id, updated_at = pg_catalog.now()",
				 2, types, values, SPI_OK_INSERT);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Delegated claiming: a role an administrator granted EXECUTE on
 * claim_column, set_claiming and unclaim_column (and USAGE on the schema)
 * may call them for the tables it owns (42501 for any other table); the
 * declarations, the triggers and the store's registries are then handled
 * as the extension's owner, since the role may not write the extension's
 * tables nor attach its trigger functions. configure() stays the
 * superuser's. Undone by SetUserIdAndSecContext(save_user, save_sec), or
 * by the abort of the transaction.
 */
static void
cell_delegate_enter(Oid relid, Oid *save_user, int *save_sec)
{
	bool		owner;

	GetUserIdAndSecContext(save_user, save_sec);
#if PG_VERSION_NUM >= 160000
	owner = object_ownercheck(RelationRelationId, relid, *save_user);
#else
	owner = pg_class_ownercheck(relid, *save_user);
#endif
	if (!owner)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s to claim or unclaim its columns", get_rel_name(relid)),
				 errhint("A role may claim the columns of the tables it owns once an administrator granted it EXECUTE on claims_cell.claim_column and claims_cell.unclaim_column.")));
	SetUserIdAndSecContext(cell_extension_owner(), *save_sec | SECURITY_LOCAL_USERID_CHANGE);
}

/* Attribute number of a column of a table, or 42703. */
static AttrNumber
cell_column(Relation rel, const char *column)
{
	AttrNumber	attnum = SPI_fnumber(RelationGetDescr(rel), column);

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						column, RelationGetRelationName(rel))));
	return attnum;
}

/* Whether a type can hold a claimed value: integers and strings. */
static bool
cell_is_value_type(Oid typid)
{
	char		category;
	bool		preferred;

	if (cell_is_integer_type(typid))
		return true;
	get_type_category_preferred(getBaseType(typid), &category, &preferred);
	return category == TYPCATEGORY_STRING;
}

/*
 * Whether a table, or for a partitioned table any member of its tree (its
 * row triggers are cloned there by name), has a trigger of that name.
 */
static bool
cell_trigger_exists(Oid relid, const char *name)
{
	List	   *members = get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE
		? find_all_inheritors(relid, NoLock, NULL) : list_make1_oid(relid);
	ListCell   *lc;

	foreach(lc, members)
	{
		Oid			types[2] = {OIDOID, TEXTOID};
		Datum		values[2] = {ObjectIdGetDatum(lfirst_oid(lc)), CStringGetTextDatum(name)};

		cell_spi("SELECT 1 FROM pg_catalog.pg_trigger WHERE tgrelid OPERATOR(pg_catalog.=) $1"
				 " AND tgname OPERATOR(pg_catalog.=) $2",
				 2, types, values, SPI_OK_SELECT);
		if (SPI_processed > 0)
			return true;
	}
	return false;
}

/*
 * The name of a new claimed column's trigger: the prefix and the column
 * name, or the attribute number when that is too long or taken (a column
 * renamed since it was claimed keeps its trigger's name).
 */
static char *
cell_trigger_name(Oid relid, const char *column, AttrNumber attnum)
{
	char	   *name = NULL;

	if (strlen(CELL_TRIGGER_PREFIX) + strlen(column) < NAMEDATALEN)
		name = psprintf("%s%s", CELL_TRIGGER_PREFIX, column);
	if (name == NULL || cell_trigger_exists(relid, name))
		name = psprintf("%sattnum_%d", CELL_TRIGGER_PREFIX, attnum);
	if (cell_trigger_exists(relid, name))
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("trigger \"%s\" for relation \"%s\" already exists",
						name, get_rel_name(relid)),
				 errhint("Rename or drop that trigger, then claim the column again.")));
	return name;
}

/* The configured server, or 55000. */
static Oid
cell_configured_server(void)
{
	int			ret = SPI_execute(CELL_CONFIGURATION_SQL, true, 1);

	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: reading the configuration failed");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("claims_cell is not configured"),
				 errhint("Call claims_cell.configure(server_name, cell_id) first.")));
	cell_check_configuration_row();
	return cell_server_oid(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), false);
}

/* Raise 22023 for a type name the store's registry does not know. */
static void
cell_unknown_type(const char *kind, const char *name, const char *registry)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown %s type \"%s\"", kind, name),
			 errdetail("The claims store at %s has no %s type of that name.",
					   cell_server_label(), kind),
			 errhint("The store's table %s lists the registered names.", registry)));
}

/*
 * A source type the store does not know: register it when the store lets
 * this cell's role insert into its registry (the administrator's choice),
 * else fail with the statement the store's administrator runs. A source
 * type only names the table a row is in (RAILS_TABLE_USERS); it is checked
 * by no rule at the store, so registering one claims nothing.
 */
static char *
cell_register_source(const char *source)
{
	CellCallResult r;
	const char *params[1] = {source};
	char	   *sql;

	cell_call("SELECT pg_catalog.has_table_privilege('%s.claim_source_types', 'INSERT')"
			  " AND pg_catalog.has_table_privilege('%s.claim_source_types', 'SELECT')",
			  0, NULL, true, &r);
	if (r.status != CELL_CALL_OK && r.status != CELL_CALL_REMOTE_ERROR)
		cell_raise_unreachable(&r);
	if (r.status == CELL_CALL_OK && r.value != NULL && strcmp(r.value, "t") == 0)
	{
		/* a concurrent registration of the same name is as good */
		cell_call("WITH ins AS (INSERT INTO %s.claim_source_types (type_id, name)"
				  " SELECT COALESCE(pg_catalog.max(t.type_id), 0) OPERATOR(pg_catalog.+) 1, $1"
				  "   FROM %s.claim_source_types t"
				  " ON CONFLICT (name) DO NOTHING RETURNING name)"
				  " SELECT COALESCE((SELECT ins.name FROM ins), $1)",
				  1, params, true, &r);
		if (r.status == CELL_CALL_OK && r.value != NULL)
		{
			ereport(NOTICE,
					(errmsg("registered source type \"%s\" at the claims store", r.value)));
			return r.value;
		}
		if (r.status == CELL_CALL_REMOTE_ERROR)
			cell_raise_remote(&r, psprintf("could not register source type \"%s\" at the claims store", source));
		cell_raise_unreachable(&r);
	}
	sql = psprintf("INSERT INTO %s.claim_source_types (type_id, name) SELECT max(type_id) + 1, %s FROM %s.claim_source_types;",
				   cell_store_schema() ? cell_store_schema() : "public", quote_literal_cstr(source),
				   cell_store_schema() ? cell_store_schema() : "public");
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown source type \"%s\"", source),
			 errdetail("The claims store at %s has no source type of that name, and does not let this cell register one.",
					   cell_server_label()),
			 errhint("Register it at the store as its administrator: %s", sql)));
	return NULL;				/* keep compiler quiet */
}

/*
 * Ask the store's registries for the canonical names of the three types
 * and whether the bucket type is integer-valued.
 */
static void
cell_resolve_types(const char *bucket, const char *subject, const char *source,
				   char **bucket_out, bool *integer_valued, char **subject_out,
				   char **source_out)
{
	CellCallResult r;
	const char *params[3] = {bucket, subject, source};
	char	   *fields[3];
	char	   *p;

	cell_call("SELECT pg_catalog.concat_ws(E'\\t',"
			  " coalesce((SELECT b.name OPERATOR(pg_catalog.||) ':' OPERATOR(pg_catalog.||) b.integer_valued::pg_catalog.text FROM %s.claim_bucket_types b"
			  "   WHERE b.name OPERATOR(pg_catalog.=) $1 OR $1 OPERATOR(pg_catalog.=) ANY (b.aliases)), '-'),"
			  " coalesce((SELECT t.name FROM %s.claim_subject_types t"
			  "   WHERE t.name OPERATOR(pg_catalog.=) $2 OR $2 OPERATOR(pg_catalog.=) ANY (t.aliases)), '-'),"
			  " coalesce((SELECT t.name FROM %s.claim_source_types t"
			  "   WHERE t.name OPERATOR(pg_catalog.=) $3 OR $3 OPERATOR(pg_catalog.=) ANY (t.aliases)), '-'))",
			  3, params, true, &r);
	if (r.status == CELL_CALL_REMOTE_ERROR)
		cell_raise_remote(&r, "could not read the registries of the claims store");
	if (r.status != CELL_CALL_OK)
		cell_raise_unreachable(&r);
	p = r.value;
	for (int i = 0; i < 3; i++)
	{
		fields[i] = p;
		p = p ? strchr(p, '\t') : NULL;
		if (p)
			*p++ = '\0';
	}
	if (fields[0] == NULL || strcmp(fields[0], "-") == 0)
		cell_unknown_type("bucket", bucket, "claim_bucket_types");
	if (fields[1] == NULL || strcmp(fields[1], "-") == 0)
		cell_unknown_type("subject", subject, "claim_subject_types");
	if (fields[2] == NULL || strcmp(fields[2], "-") == 0)
		fields[2] = cell_register_source(source);
	p = strrchr(fields[0], ':');
	*integer_valued = p && strcmp(p + 1, "true") == 0;
	if (p)
		*p = '\0';
	*bucket_out = fields[0];
	*subject_out = fields[1];
	*source_out = fields[2];
}

/*
 * Raise 42710 when a column of a partition is claimed already through a
 * partitioned table above it (its row trigger is cloned here).
 */
static void
cell_check_not_claimed_above(Relation rel, const char *column)
{
	Oid			collect = cell_collect_oid(false);

	CellTriggerColumns m;
	int			i = 0;

	while (cell_next_claim_trigger(rel, collect, &i, &m) != NULL)
	{
		if (m.declared != RelationGetRelid(rel) &&
			strcmp(get_attname(RelationGetRelid(rel), m.attnum, false), column) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("column \"%s\" of table \"%s\" is already claimed through partitioned table \"%s\"",
							column, RelationGetRelationName(rel), get_rel_name(m.declared))));
	}
}

/*
 * claims_cell.claim_column(table, column, bucket_type, subject_type,
 * subject_column, source_type): check the declaration here and against the
 * store's registries, record it and install the triggers.
 */
Datum
claims_cell_claim_column(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *column;
	char	   *bucket;
	char	   *subject;
	char	   *subject_column;
	char	   *source;
	Relation	rel;
	AttrNumber	attnum;
	AttrNumber	subject_attnum;
	CellSourceKey source_key;
	bool		with_key_array;
	char	   *qualified;
	char	   *bucket_name;
	char	   *subject_name;
	char	   *source_name;
	bool		integer_valued;
	char	   *trigger;
	Oid			types[11] = {REGCLASSOID, INT2OID, TEXTOID, TEXTOID, INT2OID, TEXTOID, INT2OID, NAMEOID,
	BOOLOID, BOOLOID, INT2ARRAYOID};
	Datum		values[11];
	StringInfoData sql;
	/* 1.4: deferrable and initially_deferred; before, every column was deferred */
	bool		with_mode = PG_NARGS() >= 8;
	bool		deferrable = with_mode ? (!PG_ARGISNULL(6) && PG_GETARG_BOOL(6)) : true;
	bool		initially_deferred = with_mode ? (!PG_ARGISNULL(7) && PG_GETARG_BOOL(7)) : true;
	char		mode = !deferrable ? 'i' : initially_deferred ? 'd' : 'e';
	Oid			save_user;
	int			save_sec;

	cell_require_args(fcinfo, 5);
	relid = PG_GETARG_OID(0);
	column = NameStr(*PG_GETARG_NAME(1));
	bucket = text_to_cstring(PG_GETARG_TEXT_PP(2));
	subject = text_to_cstring(PG_GETARG_TEXT_PP(3));
	subject_column = NameStr(*PG_GETARG_NAME(4));

	if (initially_deferred && !deferrable)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("a claimed column that is initially deferred must be deferrable"),
				 errhint("Pass \"deferrable\" => true too.")));

	cell_delegate_enter(relid, &save_user, &save_sec);
	rel = table_open(relid, ShareRowExclusiveLock);
	if (rel->rd_rel->relkind != RELKIND_RELATION &&
		rel->rd_rel->relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("Only the columns of plain and partitioned tables can be claimed.")));
	/* the children's rows are the parent's, but no trigger of it fires for them */
	if (rel->rd_rel->relkind == RELKIND_RELATION &&
		find_inheritance_children(relid, NoLock) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot claim a column of table \"%s\" because it has inheritance children",
						RelationGetRelationName(rel)),
				 errdetail("Rows of an inheritance child are rows of its parent, but the parent's claims would not be taken for them."),
				 errhint("Claim the columns of each child on its own after ALTER TABLE ... NO INHERIT.")));
	if (rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("cannot claim a column of temporary table \"%s\"", RelationGetRelationName(rel))));
	if (PG_ARGISNULL(5))
	{
		char	   *upper = asc_toupper(RelationGetRelationName(rel), strlen(RelationGetRelationName(rel)));

		source = psprintf("RAILS_TABLE_%s", upper);
	}
	else
		source = text_to_cstring(PG_GETARG_TEXT_PP(5));

	attnum = cell_column(rel, column);
	if (!cell_is_value_type(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of table \"%s\" has type %s, which cannot be claimed",
						column, RelationGetRelationName(rel),
						format_type_be(TupleDescAttr(RelationGetDescr(rel), attnum - 1)->atttypid)),
				 errdetail("Claimed columns are of a string or an integer type.")));
	subject_attnum = cell_column(rel, subject_column);
	if (!cell_is_integer_type(TupleDescAttr(RelationGetDescr(rel), subject_attnum - 1)->atttypid))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("subject column \"%s\" of table \"%s\" is not an integer column",
						subject_column, RelationGetRelationName(rel)),
				 errdetail("The subject id at the claims store is a 64-bit integer.")));
	cell_check_not_claimed_above(rel, column);
	cell_source_key_of_table(rel, &source_key);
	/* 1.5: primary keys of several columns, partitioned tables */
	with_key_array = get_attnum(get_relname_relid("claimed_attributes", get_namespace_oid("claims_cell", false)),
								"source_attnums") != InvalidAttrNumber;
	if (!with_key_array && (source_key.n > 1 || rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 source_key.n > 1
				 ? errmsg("primary key of table \"%s\" has more than one column", RelationGetRelationName(rel))
				 : errmsg("\"%s\" is a partitioned table", RelationGetRelationName(rel)),
				 errhint("ALTER EXTENSION claims_cell UPDATE to claim partitioned tables and primary keys of several columns.")));
	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		cell_check_free_in_partitions(relid, column, cell_collect_oid(false));
	qualified = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
										   RelationGetRelationName(rel));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	values[0] = ObjectIdGetDatum(relid);
	values[1] = Int16GetDatum(attnum);
	cell_spi("SELECT 1 FROM claims_cell.claimed_attributes WHERE table_name OPERATOR(pg_catalog.=) $1"
			 " AND attnum OPERATOR(pg_catalog.=) $2",
			 2, types, values, SPI_OK_SELECT);
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("column \"%s\" of table \"%s\" is already claimed",
						column, RelationGetRelationName(rel)),
				 errhint("Use claims_cell.set_claiming to pause or resume it, claims_cell.unclaim_column to stop.")));
	trigger = cell_trigger_name(relid, column, attnum);

	cell_conn_prepare(cell_configured_server());
	cell_resolve_types(bucket, subject, source, &bucket_name, &integer_valued,
					   &subject_name, &source_name);

	values[2] = CStringGetTextDatum(bucket_name);
	values[3] = CStringGetTextDatum(subject_name);
	values[4] = Int16GetDatum(subject_attnum);
	values[5] = CStringGetTextDatum(source_name);
	values[6] = Int16GetDatum(source_key.attnums[0]);
	values[7] = DirectFunctionCall1(namein, CStringGetDatum(trigger));
	values[8] = BoolGetDatum(deferrable);
	values[9] = BoolGetDatum(initially_deferred);
	if (with_key_array)
	{
		Datum		keys[INDEX_MAX_KEYS];

		for (int i = 0; i < source_key.n; i++)
			keys[i] = Int16GetDatum(source_key.attnums[i]);
		values[10] = PointerGetDatum(construct_array(keys, source_key.n, INT2OID, 2, true, TYPALIGN_SHORT));
		cell_spi("INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type,"
				 " subject_type, subject_attnum, source_type, source_attnum, trigger_name,"
				 " \"deferrable\", initially_deferred, source_attnums)"
				 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
				 11, types, values, SPI_OK_INSERT);
	}
	else if (with_mode)
		cell_spi("INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type,"
				 " subject_type, subject_attnum, source_type, source_attnum, trigger_name,"
				 " \"deferrable\", initially_deferred)"
				 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
				 10, types, values, SPI_OK_INSERT);
	else
		cell_spi("INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type,"
				 " subject_type, subject_attnum, source_type, source_attnum, trigger_name)"
				 " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
				 8, types, values, SPI_OK_INSERT);

	/* the row trigger's arguments, in CellTriggerArg order */
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "CREATE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW"
					 " EXECUTE FUNCTION claims_cell.collect('%d', %s, %s, '%d', %s, '%s', %s",
					 quote_identifier(trigger), qualified,
					 attnum, quote_literal_cstr(bucket_name),
					 quote_literal_cstr(subject_name), subject_attnum,
					 quote_literal_cstr(source_name), cell_source_key_arg(&source_key),
					 integer_valued ? "'t'" : "'f'");
	/* seven arguments: deferred, as every trigger made before 1.4 */
	if (with_mode && mode != 'd')
		appendStringInfo(&sql, ", '%c'", mode);
	appendStringInfoChar(&sql, ')');
	cell_spi(sql.data, 0, NULL, NULL, SPI_OK_UTILITY);
	/*
	 * the end of each statement claims its immediate changes, and TRUNCATE
	 * releases the rows' values: on the table and, for a partitioned one,
	 * on every partition (the row trigger is cloned to them)
	 */
	CommandCounterIncrement();
	cell_sync_tree_triggers(relid, cell_collect_oid(false));
	SPI_finish();
	table_close(rel, NoLock);
	SetUserIdAndSecContext(save_user, save_sec);
	PG_RETURN_VOID();
}

/*
 * Update or delete the declaration of a claimed column ($1 table, $2
 * attnum, $3 extra) returning its trigger's name; 42703 or 42704 when
 * the column does not exist or is not claimed.
 */
static char *
cell_find_claimed(Oid relid, const char *column, const char *sql, int nargs, Datum extra)
{
	AttrNumber	attnum = get_attnum(relid, column);
	Oid			types[3] = {REGCLASSOID, INT2OID, BOOLOID};
	Datum		values[3] = {ObjectIdGetDatum(relid), Int16GetDatum(attnum), extra};
	int			ret;

	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist",
						column, get_rel_name(relid))));
	ret = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);
	if (ret < 0)
		elog(ERROR, "claims_cell: \"%s\" failed: %s", sql, SPI_result_code_string(ret));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("column \"%s\" of table \"%s\" is not claimed",
						column, get_rel_name(relid))));
	return SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
}

/*
 * claims_cell.set_claiming(table, column, enabled): pause or resume a
 * claimed column (its trigger is disabled or enabled).
 */
Datum
claims_cell_set_claiming(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *column;
	bool		enabled;
	char	   *sql;
	char	   *trigger;
	Oid			save_user;
	int			save_sec;

	cell_require_args(fcinfo, 3);
	relid = PG_GETARG_OID(0);
	column = NameStr(*PG_GETARG_NAME(1));
	enabled = PG_GETARG_BOOL(2);
	cell_delegate_enter(relid, &save_user, &save_sec);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	trigger = cell_find_claimed(relid, column,
								"UPDATE claims_cell.claimed_attributes SET enabled = $3, updated_at = pg_catalog.now()"
								" WHERE table_name OPERATOR(pg_catalog.=) $1 AND attnum OPERATOR(pg_catalog.=) $2"
								" RETURNING trigger_name",
								3, BoolGetDatum(enabled));
	sql = psprintf("ALTER TABLE %s %s TRIGGER %s",
				   quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
											  get_rel_name(relid)),
				   enabled ? "ENABLE" : "DISABLE",
				   quote_identifier(trigger));
	cell_spi(sql, 0, NULL, NULL, SPI_OK_UTILITY);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	PG_RETURN_VOID();
}

/*
 * claims_cell.unclaim_column(table, column): stop claiming a column; its
 * values stay claimed at the store.
 */
Datum
claims_cell_unclaim_column(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	   *column;
	char	   *qualified;
	char	   *trigger;
	Oid			save_user;
	int			save_sec;

	cell_require_args(fcinfo, 2);
	relid = PG_GETARG_OID(0);
	column = NameStr(*PG_GETARG_NAME(1));
	qualified = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
										   get_rel_name(relid));
	cell_delegate_enter(relid, &save_user, &save_sec);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	trigger = cell_find_claimed(relid, column,
								"DELETE FROM claims_cell.claimed_attributes"
								" WHERE table_name OPERATOR(pg_catalog.=) $1 AND attnum OPERATOR(pg_catalog.=) $2"
								" RETURNING trigger_name",
								2, (Datum) 0);
	cell_spi(psprintf("DROP TRIGGER IF EXISTS %s ON %s", quote_identifier(trigger), qualified),
			 0, NULL, NULL, SPI_OK_UTILITY);
	/* the last claimed column takes the statement and TRUNCATE triggers with it */
	CommandCounterIncrement();
	cell_sync_tree_triggers(relid, cell_collect_oid(false));
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	PG_RETURN_VOID();
}

/* Whether a table has claimed columns: a claims_cell.collect() trigger. */
static bool
cell_table_is_claimed(Oid relid, Oid collect)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);
	bool		claimed = false;

	if (rel == NULL)
		return false;
	for (int i = 0; rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
		claimed |= rel->trigdesc->triggers[i].tgfoid == collect;
	relation_close(rel, AccessShareLock);
	return claimed;
}

/* Refuse a table that inherits (not as a partition) from a claimed table. */
static void
cell_refuse_claimed_parent(Oid child, Oid collect)
{
	Relation	inh = table_open(InheritsRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(child));
	scan = systable_beginscan(inh, InheritsRelidSeqnoIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Oid			parent = ((Form_pg_inherits) GETSTRUCT(tup))->inhparent;

		if (get_rel_relkind(parent) == RELKIND_RELATION && cell_table_is_claimed(parent, collect))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" cannot inherit from table \"%s\", which has claimed columns",
							get_rel_name(child), get_rel_name(parent)),
					 errdetail("Rows of an inheritance child are rows of its parent, but the parent's claims are not taken for them."),
					 errhint("Give the new table columns of its own and claim them, or unclaim the parent's columns first.")));
	}
	systable_endscan(scan);
	table_close(inh, AccessShareLock);
}

/*
 * claims_cell.follow_table_ddl(): ddl_command_end event trigger (enabled
 * always, so session_replication_role does not skip it), for the tables a
 * command created or altered.
 *
 * Inheritance: a table (CREATE TABLE ... INHERITS, ALTER TABLE ...
 * INHERIT, the same for foreign tables and inside CREATE SCHEMA) may not
 * inherit from a table with claimed columns: the child's rows are rows of
 * the parent, but no claim trigger fires for them. Only the command's own
 * tables are looked at, so a child left from before 1.5 blocks no other
 * DDL; whether a parent is claimed is read from its triggers in the
 * catalog, current whatever the transaction's snapshot.
 *
 * Partitions: a partition made or attached under a claimed partitioned
 * table got its row triggers cloned and now gets its statement and
 * TRUNCATE triggers; a detached one loses them, and is recorded in
 * detached_partitions, its values staying claimed (partitions.c).
 */
Datum
claims_cell_follow_table_ddl(PG_FUNCTION_ARGS)
{
	Oid			collect;
	List	   *tables = NIL;
	ListCell   *lc;
	MemoryContext caller;
	int			ret;
	Oid			save_user;
	int			save_sec;
	Node	   *parsetree;
	List	   *named;
	List	   *detached;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "claims_cell.follow_table_ddl() must be called as an event trigger");
	collect = cell_collect_oid(true);
	if (!OidIsValid(collect))
		PG_RETURN_VOID();
	caller = CurrentMemoryContext;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	ret = SPI_execute("SELECT DISTINCT objid FROM pg_catalog.pg_event_trigger_ddl_commands()"
					  " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass",
					  true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: reading the command's objects failed: %s", SPI_result_code_string(ret));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		if (!isnull)
		{
			/* past SPI_finish, which frees what was allocated inside */
			MemoryContext old = MemoryContextSwitchTo(caller);

			tables = lappend_oid(tables, DatumGetObjectId(d));
			MemoryContextSwitchTo(old);
		}
	}
	SPI_finish();

	foreach(lc, tables)
		cell_refuse_claimed_parent(lfirst_oid(lc), collect);

	parsetree = ((EventTriggerData *) fcinfo->context)->parsetree;
	named = cell_partitions_named(parsetree, &detached);
	tables = list_concat_unique_oid(tables, named);
	GetUserIdAndSecContext(&save_user, &save_sec);
	SetUserIdAndSecContext(cell_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	foreach(lc, tables)
	{
		char		relkind = get_rel_relkind(lfirst_oid(lc));

		if (relkind == RELKIND_RELATION || relkind == RELKIND_PARTITIONED_TABLE)
			cell_sync_tree_triggers(lfirst_oid(lc), collect);
	}
	cell_note_detached(parsetree, named, detached, collect);
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
	PG_RETURN_VOID();
}
