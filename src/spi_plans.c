/*-------------------------------------------------------------------------
 *
 * spi_plans.c
 *	  The SQL the extension runs, prepared once per backend.
 *
 * Every statement names the extension's schema explicitly and takes values
 * only as parameters, and runs inside an API call's frame (call_frame.c),
 * whose search path is pinned to pg_catalog: the saved plans never see a
 * path other than the one they were planned under.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"
#include "malloc_thresholds.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/plancat.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

/* Columns of a claim as claims_json_record reads them (in this order). */
#define RECORD_COLUMNS \
	"uuid, bucket_type, bucket_value, subject_type, subject_id, source_type, " \
	"source_id, user_data, creator_id, lease_uuid, status::text, created_at, updated_at"

typedef struct ClaimsPlanDef
{
	const char *sql;
	int			nargs;
	Oid			argtypes[16];
} ClaimsPlanDef;

/*
 * The begin statement: the lease row, then every claim row of the batch in
 * (bucket_type, bucket_digest) order; destroys and replaces take their rows
 * through the DO UPDATE arm. With a lease uuid the client chose, a repeated
 * begin finds its lease (ON CONFLICT DO NOTHING); a uuid the store made is
 * new, and its plain INSERT skips the speculative insertion.
 */
#define BEGIN_LEASE_INSERT \
	"WITH lease AS (" \
	"  INSERT INTO @extschema@.claim_leases" \
	"    (uuid, creator_id, payload, claim_types, claim_digests, creates_only)" \
	"  VALUES ($1, $2, $3, $5, $7, $15)"
#define BEGIN_CLAIMS_INSERT \
	"  RETURNING uuid" \
	"), touched AS (" \
	"  INSERT INTO @extschema@.claims AS c" \
	"    (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id," \
	"     source_type, source_id, user_data, creator_id, lease_uuid, status," \
	"     replace_subject_type, replace_subject_id, replace_source_type," \
	"     replace_source_id, replace_user_data)" \
	"  SELECT r.uuid, r.bucket_type, r.bucket_value, r.bucket_digest," \
	"     coalesce(r.subject_type, 0), coalesce(r.subject_id, 0)," \
	"     coalesce(r.source_type, 0), coalesce(r.source_id, '\\x00'::bytea)," \
	"     r.user_data, $2, l.uuid," \
	"     (CASE WHEN r.op = 1 THEN 'LEASE_CREATING' ELSE 'LEASE_DESTROYING' END)::@extschema@.claim_status," \
	"     CASE WHEN r.op = 3 THEN r.subject_type END," \
	"     CASE WHEN r.op = 3 THEN r.subject_id END," \
	"     CASE WHEN r.op = 3 THEN r.source_type END," \
	"     CASE WHEN r.op = 3 THEN r.source_id END," \
	"     CASE WHEN r.op = 3 THEN r.user_data END" \
	"  FROM unnest($4, $5, $6, $7, $8, $9, $10, $11, $12, $13)" \
	"       AS r(op, bucket_type, bucket_value, bucket_digest, subject_type, subject_id," \
	"            source_type, source_id, user_data, uuid)" \
	"  CROSS JOIN lease l" \
	"  ORDER BY r.bucket_type, r.bucket_digest" \
	"  ON CONFLICT (bucket_type, bucket_digest) DO UPDATE" \
	"  SET lease_uuid = excluded.lease_uuid," \
	"      status = 'LEASE_DESTROYING'," \
	"      replace_subject_type = excluded.replace_subject_type," \
	"      replace_subject_id = excluded.replace_subject_id," \
	"      replace_source_type = excluded.replace_source_type," \
	"      replace_source_id = excluded.replace_source_id," \
	"      replace_user_data = excluded.replace_user_data," \
	"      updated_at = now()" \
	"  WHERE excluded.status = 'LEASE_DESTROYING'" \
	"    AND c.lease_uuid IS NULL" \
	"    AND c.creator_id = excluded.creator_id" \
	"    AND c.bucket_value = excluded.bucket_value" \
	"  RETURNING c.uuid = ANY ($14) AS placeholder" \
	")" \
	" SELECT (SELECT count(*) FROM lease), count(*)," \
	"        count(*) FILTER (WHERE placeholder)" \
	" FROM touched"
#define BEGIN_ARGTYPES \
		{UUIDOID, INT8OID, JSONBOID, INT2ARRAYOID, INT4ARRAYOID, TEXTARRAYOID, \
		BYTEAARRAYOID, INT4ARRAYOID, INT8ARRAYOID, INT4ARRAYOID, BYTEAARRAYOID, \
		JSONBARRAYOID, UUIDARRAYOID, UUIDARRAYOID, BOOLOID}

static const ClaimsPlanDef plan_defs[CLAIMS_NUM_PLANS] = {
	[CLAIMS_PLAN_BEGIN] = {
		BEGIN_LEASE_INSERT
		"  ON CONFLICT (uuid) DO NOTHING"
		BEGIN_CLAIMS_INSERT,
		15, BEGIN_ARGTYPES
	},
	[CLAIMS_PLAN_BEGIN_NEW_LEASE] = {
		BEGIN_LEASE_INSERT
		BEGIN_CLAIMS_INSERT,
		15, BEGIN_ARGTYPES
	},
	[CLAIMS_PLAN_LEASE_LOOKUP] = {
		"SELECT creator_id, payload, state::text FROM @extschema@.claim_leases WHERE uuid = $1",
		1, {UUIDOID}
	},
	[CLAIMS_PLAN_CLASSIFY] = {
		"SELECT c.uuid, c.creator_id, c.lease_uuid"
		" FROM unnest($1, $2) WITH ORDINALITY AS k(bucket_type, bucket_digest, i)"
		" LEFT JOIN @extschema@.claims c"
		"   ON c.bucket_type = k.bucket_type AND c.bucket_digest = k.bucket_digest"
		" ORDER BY k.i",
		2, {INT4ARRAYOID, BYTEAARRAYOID}
	},
	/*
	 * Finishing a lease that only creates: the floor's two updates (or an
	 * update and a delete), no explicit row locks. The claim rows are
	 * visited in the lease's (bucket_type, bucket_digest) order, the global
	 * row order, by the nested loop over its key arrays. No row: the lease
	 * is not an outstanding creates-only lease of the cell; the general
	 * statement below then finishes or classifies it. The lease is found by
	 * its primary key: the state is tested with enum_eq() rather than "=",
	 * which the planner cannot match with the predicate of
	 * claim_leases_outstanding_idx (creator_id, created_at, uuid). It would
	 * otherwise pick that index, small in the statistics, and walk every
	 * entry of the cell's leases finished since the last vacuum to find one
	 * uuid: a commit then costs more the more signups came before it.
	 */
	[CLAIMS_PLAN_COMMIT_CREATES] = {
		"WITH lease AS ("
		"  UPDATE @extschema@.claim_leases"
		"  SET state = 'committed', updated_at = now(), finished_at = now()"
		"  WHERE uuid = $1 AND creator_id = $2 AND creates_only"
		"    AND pg_catalog.enum_eq(state, 'outstanding')"
		"  RETURNING uuid, claim_types, claim_digests"
		"), kept AS ("
		"  UPDATE @extschema@.claims c"
		"  SET status = 'ACTIVE', lease_uuid = NULL, updated_at = now()"
		"  FROM lease, unnest(lease.claim_types, lease.claim_digests) AS k(bucket_type, bucket_digest)"
		"  WHERE c.bucket_type = k.bucket_type AND c.bucket_digest = k.bucket_digest"
		"    AND c.lease_uuid = lease.uuid"
		"  RETURNING 1"
		")"
		" SELECT (SELECT count(*) FROM kept) FROM lease",
		2, {UUIDOID, INT8OID}
	},
	[CLAIMS_PLAN_ROLLBACK_CREATES] = {
		"WITH lease AS ("
		"  UPDATE @extschema@.claim_leases"
		"  SET state = 'rolled_back', updated_at = now(), finished_at = now()"
		"  WHERE uuid = $1 AND creator_id = $2 AND creates_only"
		"    AND pg_catalog.enum_eq(state, 'outstanding')"
		"  RETURNING uuid, claim_types, claim_digests"
		"), gone AS ("
		"  DELETE FROM @extschema@.claims c"
		"  USING lease, unnest(lease.claim_types, lease.claim_digests) AS k(bucket_type, bucket_digest)"
		"  WHERE c.bucket_type = k.bucket_type AND c.bucket_digest = k.bucket_digest"
		"    AND c.lease_uuid = lease.uuid"
		"  RETURNING 1"
		")"
		" SELECT (SELECT count(*) FROM gone) FROM lease",
		2, {UUIDOID, INT8OID}
	},
	[CLAIMS_PLAN_COMMIT] = {
		"WITH lease AS ("
		"  SELECT uuid, creator_id, state, claim_types, claim_digests"
		"  FROM @extschema@.claim_leases WHERE uuid = $1 FOR UPDATE"
		"), act AS ("
		"  SELECT * FROM lease WHERE creator_id = $2 AND state = 'outstanding'"
		"), locked AS ("
		"  SELECT c.uuid, c.status, c.replace_subject_type IS NOT NULL AS replacing"
		"  FROM unnest((SELECT claim_types FROM act), (SELECT claim_digests FROM act))"
		"       AS k(bucket_type, bucket_digest)"
		"  JOIN @extschema@.claims c"
		"    ON c.bucket_type = k.bucket_type AND c.bucket_digest = k.bucket_digest"
		"  WHERE c.lease_uuid = (SELECT uuid FROM act)"
		"  ORDER BY c.bucket_type, c.bucket_digest"
		"  FOR UPDATE OF c"
		"), gone AS ("
		"  DELETE FROM @extschema@.claims c USING locked l"
		"  WHERE c.uuid = l.uuid AND l.status = 'LEASE_DESTROYING' AND NOT l.replacing"
		"  RETURNING 1"
		"), kept AS ("
		"  UPDATE @extschema@.claims c"
		"  SET status = 'ACTIVE', lease_uuid = NULL,"
		"      subject_type = CASE WHEN l.replacing THEN c.replace_subject_type ELSE c.subject_type END,"
		"      subject_id = CASE WHEN l.replacing THEN c.replace_subject_id ELSE c.subject_id END,"
		"      source_type = CASE WHEN l.replacing THEN c.replace_source_type ELSE c.source_type END,"
		"      source_id = CASE WHEN l.replacing THEN c.replace_source_id ELSE c.source_id END,"
		"      user_data = CASE WHEN l.replacing THEN c.replace_user_data ELSE c.user_data END,"
		"      replace_subject_type = NULL, replace_subject_id = NULL,"
		"      replace_source_type = NULL, replace_source_id = NULL,"
		"      replace_user_data = NULL, updated_at = now()"
		"  FROM locked l"
		"  WHERE c.uuid = l.uuid AND (l.status = 'LEASE_CREATING' OR l.replacing)"
		"  RETURNING 1"
		"), done AS ("
		"  UPDATE @extschema@.claim_leases le"
		"  SET state = 'committed', updated_at = now(), finished_at = now()"
		"  FROM act WHERE le.uuid = act.uuid"
		"  RETURNING 1"
		")"
		" SELECT lease.creator_id, lease.state::text,"
		"        (SELECT count(*) FROM gone), (SELECT count(*) FROM kept),"
		"        (SELECT count(*) FROM done)"
		" FROM lease",
		2, {UUIDOID, INT8OID}
	},
	[CLAIMS_PLAN_ROLLBACK] = {
		"WITH lease AS ("
		"  SELECT uuid, creator_id, state, claim_types, claim_digests"
		"  FROM @extschema@.claim_leases WHERE uuid = $1 FOR UPDATE"
		"), act AS ("
		"  SELECT * FROM lease WHERE creator_id = $2 AND state = 'outstanding'"
		"), locked AS ("
		"  SELECT c.uuid, c.status"
		"  FROM unnest((SELECT claim_types FROM act), (SELECT claim_digests FROM act))"
		"       AS k(bucket_type, bucket_digest)"
		"  JOIN @extschema@.claims c"
		"    ON c.bucket_type = k.bucket_type AND c.bucket_digest = k.bucket_digest"
		"  WHERE c.lease_uuid = (SELECT uuid FROM act)"
		"  ORDER BY c.bucket_type, c.bucket_digest"
		"  FOR UPDATE OF c"
		"), gone AS ("
		"  DELETE FROM @extschema@.claims c USING locked l"
		"  WHERE c.uuid = l.uuid AND l.status = 'LEASE_CREATING'"
		"  RETURNING 1"
		"), kept AS ("
		"  UPDATE @extschema@.claims c"
		"  SET status = 'ACTIVE', lease_uuid = NULL,"
		"      replace_subject_type = NULL, replace_subject_id = NULL,"
		"      replace_source_type = NULL, replace_source_id = NULL,"
		"      replace_user_data = NULL, updated_at = now()"
		"  FROM locked l"
		"  WHERE c.uuid = l.uuid AND l.status = 'LEASE_DESTROYING'"
		"  RETURNING 1"
		"), done AS ("
		"  UPDATE @extschema@.claim_leases le"
		"  SET state = 'rolled_back', updated_at = now(), finished_at = now()"
		"  FROM act WHERE le.uuid = act.uuid"
		"  RETURNING 1"
		")"
		" SELECT lease.creator_id, lease.state::text,"
		"        (SELECT count(*) FROM gone), (SELECT count(*) FROM kept),"
		"        (SELECT count(*) FROM done)"
		" FROM lease",
		2, {UUIDOID, INT8OID}
	},
	[CLAIMS_PLAN_LIST_LEASES] = {
		"SELECT uuid, created_at, updated_at FROM @extschema@.claim_leases"
		" WHERE creator_id = $1 AND state = 'outstanding'"
		"   AND created_at > $2 AND (created_at, uuid) > ($3, $4)"
		" ORDER BY created_at, uuid LIMIT $5",
		5, {INT8OID, TIMESTAMPTZOID, TIMESTAMPTZOID, UUIDOID, INT4OID}
	},
	[CLAIMS_PLAN_LIST_RECORDS] = {
		"SELECT " RECORD_COLUMNS " FROM @extschema@.claims"
		" WHERE creator_id = $1 AND source_type = $2 AND source_id > $3"
		"   AND (cardinality($4) = 0 OR bucket_type = ANY ($4))"
		" ORDER BY source_id, bucket_type, bucket_digest LIMIT $5",
		5, {INT8OID, INT4OID, BYTEAOID, INT4ARRAYOID, INT4OID}
	},
	[CLAIMS_PLAN_LIST_RECORDS_LTE] = {
		"SELECT " RECORD_COLUMNS " FROM @extschema@.claims"
		" WHERE creator_id = $1 AND source_type = $2 AND source_id > $3"
		"   AND source_id <= $6"
		"   AND (cardinality($4) = 0 OR bucket_type = ANY ($4))"
		" ORDER BY source_id, bucket_type, bucket_digest LIMIT $5",
		6, {INT8OID, INT4OID, BYTEAOID, INT4ARRAYOID, INT4OID, BYTEAOID}
	},
	[CLAIMS_PLAN_LIST_RECORDS_GROUP] = {
		"SELECT " RECORD_COLUMNS " FROM @extschema@.claims"
		" WHERE creator_id = $1 AND source_type = $2 AND source_id = $3"
		"   AND (cardinality($4) = 0 OR bucket_type = ANY ($4))"
		" ORDER BY source_id, bucket_type, bucket_digest",
		4, {INT8OID, INT4OID, BYTEAOID, INT4ARRAYOID}
	},
	[CLAIMS_PLAN_GET_RECORD] = {
		"SELECT " RECORD_COLUMNS " FROM @extschema@.claims"
		" WHERE bucket_type = $1 AND bucket_digest = $2 AND bucket_value = $3",
		3, {INT4OID, BYTEAOID, TEXTOID}
	},
	[CLAIMS_PLAN_REGISTRY_BUCKETS] = {
		"SELECT type_id, name, claim_field, integer_valued, aliases, builtin"
		" FROM @extschema@.claim_bucket_types ORDER BY type_id",
		0, {InvalidOid}
	},
	[CLAIMS_PLAN_REGISTRY_SUBJECTS] = {
		"SELECT type_id, name, NULL::text, false, aliases, builtin"
		" FROM @extschema@.claim_subject_types ORDER BY type_id",
		0, {InvalidOid}
	},
	[CLAIMS_PLAN_REGISTRY_SOURCES] = {
		"SELECT type_id, name, NULL::text, false, aliases, builtin"
		" FROM @extschema@.claim_source_types ORDER BY type_id",
		0, {InvalidOid}
	},
	[CLAIMS_PLAN_CELLS] = {
		"SELECT cell_id, role_name, disabled FROM @extschema@.claim_cells ORDER BY cell_id",
		0, {InvalidOid}
	},
	/*
	 * The same with the CellInfo columns (version 1.2 on): the sequence
	 * ranges as inclusive [minval, maxval] pairs in the order they were
	 * set, an unbounded end standing for the int64 limit.
	 */
	[CLAIMS_PLAN_CELLS_INFO] = {
		"SELECT cell_id, role_name, disabled, address, session_prefix,"
		"       ARRAY(SELECT coalesce(lower(u.r), '-9223372036854775808'::bigint)"
		"             FROM unnest(sequence_ranges) WITH ORDINALITY AS u(r, o) ORDER BY u.o),"
		"       ARRAY(SELECT coalesce(upper(u.r) - 1, '9223372036854775807'::bigint)"
		"             FROM unnest(sequence_ranges) WITH ORDINALITY AS u(r, o) ORDER BY u.o)"
		" FROM @extschema@.claim_cells ORDER BY cell_id",
		0, {InvalidOid}
	},
};

static SPIPlanPtr plans[CLAIMS_NUM_PLANS];

/*
 * The schema the saved plans name, by oid and by the name in their text:
 * that of the API call running (claims_plans_check_schema at its start).
 */
static Oid	plans_schema = InvalidOid;
static char plans_schema_name[NAMEDATALEN];
static bool plans_schema_maybe_renamed = false;

/* Plans dropped while a call may still run them: freed at transaction end. */
static List *retired_plans = NIL;

/* True from a store statement's run until its plan is ready (see claims_get_relation_info). */
static bool planning_store_statement = false;
static get_relation_info_hook_type prev_get_relation_info_hook = NULL;
static ExecutorStart_hook_type prev_executor_start_hook = NULL;

/*
 * A schema was changed somewhere (syscache callback): check at the next
 * call whether the plans' schema still has the name their text embeds.
 */
void
claims_plans_schema_changed(void)
{
	plans_schema_maybe_renamed = true;
}

/*
 * Drop the saved plans; the next use prepares them again. A call this one
 * is nested in may be running one of them, so they are freed when the
 * transaction ends.
 */
static void
claims_plans_forget(void)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	for (int i = 0; i < CLAIMS_NUM_PLANS; i++)
	{
		if (plans[i])
			retired_plans = lappend(retired_plans, plans[i]);
		plans[i] = NULL;
	}
	MemoryContextSwitchTo(old);
}

/*
 * The end of a transaction (call_frame.c's callback): no API call runs any
 * more, so the retired plans are freed, and no store statement is being
 * planned.
 */
void
claims_plans_xact_end(void)
{
	ListCell   *lc;

	planning_store_statement = false;
	foreach(lc, retired_plans)
		SPI_freeplan((SPIPlanPtr) lfirst(lc));
	list_free(retired_plans);
	retired_plans = NIL;
}

/*
 * Make the saved plans fit the extension's schema: another schema (DROP
 * and CREATE EXTENSION elsewhere) or a new name for the same schema (ALTER
 * SCHEMA ... RENAME: re-planning would look up the old name) drops them.
 */
void
claims_plans_check_schema(Oid nsp)
{
	if (plans_schema == nsp && !plans_schema_maybe_renamed)
		return;
	if (plans_schema == nsp)
	{
		char	   *name = get_namespace_name(nsp);

		plans_schema_maybe_renamed = false;
		if (name != NULL && strcmp(name, plans_schema_name) == 0)
			return;
	}
	claims_plans_forget();
	plans_schema = nsp;
	plans_schema_maybe_renamed = false;
	strlcpy(plans_schema_name, get_namespace_name(nsp) ? get_namespace_name(nsp) : "",
			NAMEDATALEN);
}

/*
 * Replace @extschema@ in a statement with the quoted schema name.
 */
static char *
claims_expand_schema(const char *sql)
{
	const char *schema = quote_identifier(get_namespace_name(plans_schema));
	StringInfoData buf;
	const char *p = sql;
	const char *hit;

	initStringInfo(&buf);
	while ((hit = strstr(p, "@extschema@")) != NULL)
	{
		appendBinaryStringInfo(&buf, p, hit - p);
		appendStringInfoString(&buf, schema);
		p = hit + strlen("@extschema@");
	}
	appendStringInfoString(&buf, p);
	return buf.data;
}

/*
 * The saved plan of a statement, prepared on first use.
 */
static SPIPlanPtr
claims_plan(ClaimsPlanId id)
{
	if (plans[id] == NULL)
	{
		const ClaimsPlanDef *def = &plan_defs[id];
		char	   *sql = claims_expand_schema(def->sql);
		SPIPlanPtr	plan;

		/*
		 * Parameters are keys and arrays of keys, never selectivity hints:
		 * a generic plan is always right, and planning the begin statement
		 * afresh for every call would cost more than running it.
		 */
		plan = SPI_prepare_cursor(sql, def->nargs, (Oid *) def->argtypes,
								  CURSOR_OPT_GENERIC_PLAN);
		if (plan == NULL)
			elog(ERROR, "claims: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "claims: SPI_keepplan failed");
		plans[id] = plan;
		pfree(sql);
	}
	return plans[id];
}

/*
 * While a statement of the store is planned, claims and claim_leases count
 * as large tables (at least CLAIMS_PLANNED_TUPLES rows) whose indexes offer
 * no bitmap scans. The plans are generic and kept for the life of the
 * backend: planned from the statistics of a new store (empty tables), they
 * would scan whole tables, per call, once the tables have grown, until the
 * next ANALYZE; and without statistics the planner guesses 25 rows for a
 * key of the unique (bucket_type, bucket_digest) index, for which it would
 * choose a bitmap scan, slower than a plain index scan for one row. Every
 * statement reads by key, so the plan for a large table is the right one at
 * any size.
 */
#define CLAIMS_PLANNED_TUPLES	1000000.0
#define CLAIMS_PLANNED_PAGES	10000


/* get_relation_info_hook: the size the store's statements are planned for. */
static void
claims_get_relation_info(PlannerInfo *root, Oid relid, bool inhparent, RelOptInfo *rel)
{
	ListCell   *lc;

	if (prev_get_relation_info_hook)
		prev_get_relation_info_hook(root, relid, inhparent, rel);
	if (!planning_store_statement || rel->tuples >= CLAIMS_PLANNED_TUPLES)
		return;
	if (relid != get_relname_relid("claims", plans_schema) &&
		relid != get_relname_relid("claim_leases", plans_schema))
		return;

	rel->tuples = CLAIMS_PLANNED_TUPLES;
	rel->pages = Max(rel->pages, CLAIMS_PLANNED_PAGES);
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *index = (IndexOptInfo *) lfirst(lc);

		index->pages = Max(index->pages, CLAIMS_PLANNED_PAGES / 4);
		if (index->indpred == NIL)
			index->tuples = rel->tuples;
		/* one row by key: a plain index scan beats a bitmap */
		index->amhasgetbitmap = false;
	}
}

/*
 * ExecutorStart_hook: the statement being started has its plan, so what is
 * planned from here on (triggers, foreign keys, functions the statement
 * runs) is not the store's statement and is planned as usual.
 */
static void
claims_executor_start(QueryDesc *queryDesc, int eflags)
{
	planning_store_statement = false;
	if (prev_executor_start_hook)
		prev_executor_start_hook(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* Install the planner and executor hooks (from _PG_init). */
void
claims_plans_init(void)
{
	prev_get_relation_info_hook = get_relation_info_hook;
	get_relation_info_hook = claims_get_relation_info;
	prev_executor_start_hook = ExecutorStart_hook;
	ExecutorStart_hook = claims_executor_start;
}

/*
 * Run a saved statement under a given snapshot (InvalidSnapshot: SPI's
 * usual choice for read_only), planned if need be as for large tables.
 */
static int
claims_run_plan(ClaimsPlanId id, Datum *args, const char *nulls, Snapshot snapshot,
				bool read_only, long count)
{
	SPIPlanPtr	plan = claims_plan(id);
	bool		saved = planning_store_statement;
	int			ret;

	planning_store_statement = true;
	PG_TRY();
	{
		if (snapshot != InvalidSnapshot)
			ret = SPI_execute_snapshot(plan, args, nulls, snapshot, InvalidSnapshot,
									   read_only, false, count);
		else
			ret = SPI_execute_plan(plan, args, nulls, read_only, count);
	}
	PG_FINALLY();
	{
		planning_store_statement = saved;
	}
	PG_END_TRY();
	return ret;
}

/* Run a saved statement as SPI_execute_plan does. */
int
claims_execute(ClaimsPlanId id, Datum *args, const char *nulls, bool read_only, long count)
{
	return claims_run_plan(id, args, nulls, InvalidSnapshot, read_only, count);
}

/* Run a saved read-only statement under the given snapshot. */
int
claims_execute_snapshot(ClaimsPlanId id, Datum *args, const char *nulls, Snapshot snapshot,
						long count)
{
	return claims_run_plan(id, args, nulls, snapshot, true, count);
}
