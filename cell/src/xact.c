/*-------------------------------------------------------------------------
 *
 * xact.c
 *	  The lease protocol, driven by the statement trigger and the
 *	  transaction callbacks.
 *
 * End of a statement (claims_cell.claim_statement(), TRUNCATE, and
 * set_constraints('IMMEDIATE')): the immediate changes are folded and
 * leased as below, each lease recorded with the level of the
 * subtransaction that took it (a savepoint that rolls back rolls it back
 * at the store). A value already under one of the transaction's leases, or
 * with deferred changes, is only checked for two holders there, and goes
 * to PRE_COMMIT, which supersedes that lease with leases of the final
 * state (rollback and begin in one transaction at the store).
 *
 * PRE_COMMIT (after every deferred check): fold the transaction's changes
 * into creates and destroys, split them into leases of at most
 * claims_cell.max_batch_size records (a replace stays in one lease), send
 * one claims_begin_update per lease with a uuid chosen here (a retry after
 * a timeout gets the same lease), map a refusal to a local error, and
 * insert each lease's row into claims_cell.outstanding_leases in the same
 * transaction. COMMIT: commit the leases at the store; ABORT: roll back
 * every lease that may exist. Neither may raise (an
 * error after the commit record would PANIC): failures become WARNINGs
 * and the lease row stays for recovery. The rows of committed leases are
 * deleted by the backend's next READ COMMITTED transaction that claims or
 * writes (a transaction snapshot could meet claims_cell.reconcile()'s
 * concurrent delete as a serialization failure), else by reconcile().
 * PRE_PREPARE refuses a transaction with claims.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"
#include "store_client.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

/* The changes of one row to one value, in order. */
typedef struct CellRowChanges
{
	CellChange *first;
	CellChange *last;
	int			last_pos;		/* position of last in the transaction's changes */
} CellRowChanges;

/* Values folded under one hash (collisions chain). */
typedef struct CellFoldEntry
{
	uint64		hash;
	List	   *chain;
} CellFoldEntry;

/* One lease of the current transaction. */
typedef struct CellLease
{
	char		uuid[UUID_LEN * 2 + 5];
	bool		sent;			/* a lease may exist at the store */
	bool		taken;			/* the store confirmed it */
	bool		in_doubt;		/* an abandoned try may still create it */
	bool		gone;			/* rolled back with a savepoint, or superseded */
	bool		dirty;			/* PRE_COMMIT: its values changed after it was taken */
	bool		repair;			/* a claims_cell.verify() repair's, not a statement's */
	int			level;			/* transaction nesting level that took it */
} CellLease;

/* What claiming runs under: SPI, the extension's owner, a pinned search_path. */
typedef struct CellClaimCtx
{
	Oid			owner;
	Oid			save_user;
	int			save_sec;
	int			save_nestlevel;
	int64		cell_id;
	char	   *server_name;
} CellClaimCtx;

/* The leases of the current transaction (cell_lease_cxt). */
static MemoryContext cell_lease_cxt = NULL;
static List *cell_leases = NIL;
static int64 cell_lease_cell_id = 0;

/*
 * Committed leases whose local rows are still to delete (TopMemoryContext).
 * Only READ COMMITTED transactions delete them, so a backend that commits in
 * REPEATABLE READ forever keeps at most CELL_DONE_MAX; reconcile() deletes
 * the rows of those it forgets.
 */
#define CELL_DONE_MAX 1024
static List *cell_done_leases = NIL;
static int	cell_done_flushing = 0;

/*
 * The statements PRE_COMMIT runs in every claiming transaction, planned once
 * per backend (the plan cache re-plans them after DDL on their tables, and
 * checks privileges at each execution, as the extension's owner).
 */
enum
{
	CELL_STMT_DELETE_DONE,
	CELL_STMT_CONFIGURATION,
	CELL_NSTMTS
};
static SPIPlanPtr cell_stmts[CELL_NSTMTS];

static void cell_record_lease(CellLease *lease, pg_uuid_t *uuid, const char *request,
							  Oid owner, Oid save_user, int save_sec);
static void cell_finish_lease(CellLease *lease, bool commit, bool hand_off);

/* Execute one of those statements (inside SPI_connect), preparing it first. */
static int
cell_stmt_execute(int stmt, Datum *values, bool read_only, long count)
{
	static const char *const sql[CELL_NSTMTS] = {
		"DELETE FROM claims_cell.outstanding_leases WHERE uuid OPERATOR(pg_catalog.=) ANY (ARRAY("
		" SELECT l.uuid FROM claims_cell.outstanding_leases l WHERE l.uuid OPERATOR(pg_catalog.=) ANY ($1)"
		" FOR UPDATE SKIP LOCKED))",
		CELL_CONFIGURATION_SQL,
	};
	static const Oid argtypes[CELL_NSTMTS] = {UUIDARRAYOID, InvalidOid};
	static const int nargs[CELL_NSTMTS] = {1, 0};

	if (cell_stmts[stmt] == NULL)
	{
		SPIPlanPtr	plan = SPI_prepare(sql[stmt], nargs[stmt], (Oid *) &argtypes[stmt]);

		if (plan == NULL)
			elog(ERROR, "claims_cell: preparing \"%s\" failed: %s", sql[stmt],
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "claims_cell: keeping the plan of \"%s\" failed", sql[stmt]);
		cell_stmts[stmt] = plan;
	}
	return SPI_execute_plan(cell_stmts[stmt], values, NULL, read_only, count);
}

/*
 * Insert a lease's row (inside SPI_connect, as the extension's owner) with
 * the request that took it, which lets reconcile() claim the values again
 * should the store lose the lease (a failover). Before the 1.4 update the
 * table has no request column; the statement is planned again when an
 * update in this session adds it.
 */
static int
cell_insert_lease_row(pg_uuid_t *uuid, const char *request)
{
	static SPIPlanPtr plan = NULL;
	static bool with_request = false;
	Oid			argtypes[2] = {UUIDOID, JSONBOID};
	Datum		args[2];
	Oid			rel = get_relname_relid("outstanding_leases", get_namespace_oid("claims_cell", false));
	bool		has_request = OidIsValid(rel) && get_attnum(rel, "request") != InvalidAttrNumber;

	/* ALTER EXTENSION UPDATE in this session adds the column: plan again */
	if (plan != NULL && has_request != with_request)
	{
		SPI_freeplan(plan);
		plan = NULL;
	}
	if (plan == NULL)
	{
		const char *sql;

		with_request = has_request;
		sql = with_request
			? "INSERT INTO claims_cell.outstanding_leases (uuid, request) VALUES ($1, $2)"
			" ON CONFLICT (uuid) DO NOTHING"
			: "INSERT INTO claims_cell.outstanding_leases (uuid) VALUES ($1)"
			" ON CONFLICT (uuid) DO NOTHING";
		plan = SPI_prepare(sql, with_request ? 2 : 1, argtypes);
		if (plan == NULL)
			elog(ERROR, "claims_cell: preparing \"%s\" failed: %s", sql,
				 SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "claims_cell: keeping the plan of \"%s\" failed", sql);
	}
	args[0] = UUIDPGetDatum(uuid);
	if (with_request)
		args[1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(request));
	return SPI_execute_plan(plan, args, NULL, false, 0);
}

/* Owner of the extension's schema, who may read and write its tables. */
static Oid
cell_owner(bool missing_ok)
{
	Oid			nsp = get_namespace_oid("claims_cell", true);
	HeapTuple	tup;
	Oid			owner;

	if (!OidIsValid(nsp))
	{
		if (missing_ok)
			return InvalidOid;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_SCHEMA),
				 errmsg("schema \"claims_cell\" does not exist")));
	}
	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for namespace %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

/* The extension's owner (columns.c runs delegated claiming as it). */
Oid
cell_extension_owner(void)
{
	return cell_owner(false);
}

/* Whether two changes are of the same row of the same column. */
static bool
cell_same_row(const CellChange *a, const CellChange *b)
{
	return a->relid == b->relid && a->attnum == b->attnum &&
		a->source_len == b->source_len &&
		memcmp(a->source_id, b->source_id, a->source_len) == 0;
}

/*
 * Raise 23505 for a value two rows hold at the end of the transaction, as
 * a unique index would: one claim at the store cannot stand for both.
 */
static void
cell_raise_duplicate(const CellChange *a, const CellChange *b)
{
	char	   *table = get_rel_name(b->relid);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("value \"%s\" of claimed column \"%s\" of table \"%s\" is held by more than one row",
					b->value, b->column, table),
			 errdetail("Key (%s)=(%s) is held by a row of table \"%s\" (column \"%s\") too; a claimed value is unique across all cells and within this one.",
					   b->column, b->value, get_rel_name(a->relid), a->column),
			 err_generic_string(PG_DIAG_SCHEMA_NAME, get_namespace_name(get_rel_namespace(b->relid))),
			 err_generic_string(PG_DIAG_TABLE_NAME, table),
			 err_generic_string(PG_DIAG_COLUMN_NAME, b->column)));
}

/*
 * Fold the changes per value. Several rows may change one value in one
 * transaction (two rows swap their values in one UPDATE): the value
 * existed before the transaction if some row's first change to it is a
 * destroy, and its final holder is the row whose last change to it is a
 * create. The net is a create, a destroy, or, when
 * it existed and still exists, a replace carrying the holder's subject and
 * source. Two rows that both end holding it are a unique violation. Order
 * of first appearance is kept.
 */
static List *
cell_fold(List *changes)
{
	HASHCTL		ctl;
	HTAB	   *h;
	List	   *nets = NIL;
	ListCell   *lc;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(CellFoldEntry);
	ctl.hcxt = CurrentMemoryContext;
	h = hash_create("claims_cell fold", 256, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	foreach(lc, changes)
	{
		CellChange *c = lfirst(lc);
		char	   *key;
		uint64		hash;
		bool		found;
		CellFoldEntry *entry;
		CellNet    *net = NULL;
		CellRowChanges *row;
		ListCell   *lc2;

		/* a table dropped by this transaction claims and releases nothing */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->relid)))
			continue;
		key = psprintf("%s=%s", c->bucket_type, c->value);
		hash = hash_bytes_extended((const unsigned char *) key, strlen(key), 0);
		entry = hash_search(h, &hash, HASH_ENTER, &found);

		if (!found)
			entry->chain = NIL;
		foreach(lc2, entry->chain)
		{
			CellNet    *n = lfirst(lc2);

			if (strcmp(n->key, key) == 0)
				net = n;
		}
		if (net == NULL)
		{
			net = palloc0(sizeof(CellNet));
			net->key = key;
			nets = lappend(nets, net);
			entry->chain = lappend(entry->chain, net);
		}
		row = NULL;
		foreach(lc2, net->rows)
		{
			CellRowChanges *r = lfirst(lc2);

			if (cell_same_row(r->first, c))
				row = r;
		}
		if (row == NULL)
		{
			row = palloc0(sizeof(CellRowChanges));
			row->first = c;
			net->rows = lappend(net->rows, row);
		}
		row->last = c;
		row->last_pos = foreach_current_index(lc);
		net->last = c;
	}
	hash_destroy(h);

	foreach(lc, nets)
	{
		CellNet    *net = lfirst(lc);
		CellRowChanges *holder = NULL;
		ListCell   *lc2;

		foreach(lc2, net->rows)
		{
			CellRowChanges *r = lfirst(lc2);

			if (!r->first->create)
				net->existed = true;
			if (!r->last->create)
				continue;
			/* one claim cannot stand for two rows */
			if (holder != NULL)
				cell_raise_duplicate(holder->last, r->last);
			holder = r;
		}
		if (holder != NULL)
			net->last = holder->last;
		list_free_deep(net->rows);
		net->rows = NIL;
	}
	return nets;
}

/*
 * Raise 23505 when a value this transaction claims is held by another row
 * of its column too: a row written before the column was claimed, with the
 * triggers off, or earlier in this transaction (inside SPI_connect). The
 * rows are counted as the table's owner (holders.c); a unique index on the
 * column forbids such rows already, and a column without any index is not
 * searched (the store and verify() see such rows).
 */
static void
cell_check_local_holders(List *nets)
{
	List	   *columns = NIL;	/* CellChange per claimed column seen */
	List	   *plans = NIL;
	List	   *owners = NIL;
	ListCell   *lc;

	/* the latest row versions, as a unique index checks them (REPEATABLE READ) */
	PushActiveSnapshot(GetLatestSnapshot());
	foreach(lc, nets)
	{
		CellChange *c = ((CellNet *) lfirst(lc))->last;
		SPIPlanPtr	plan = NULL;
		Oid			owner = InvalidOid;
		bool		found = false;
		ListCell   *lc2;

		if (!c->create)
			continue;
		foreach(lc2, columns)
		{
			CellChange *k = lfirst(lc2);

			if (k->relid == c->relid && k->attnum == c->attnum)
			{
				plan = list_nth(plans, foreach_current_index(lc2));
				owner = list_nth_oid(owners, foreach_current_index(lc2));
				found = true;
				break;
			}
		}
		if (!found)
		{
			plan = cell_holders_count_plan(c->relid, c->attnum, &owner);
			columns = lappend(columns, c);
			plans = lappend(plans, plan);
			owners = lappend_oid(owners, owner);
		}
		if (plan != NULL && cell_holders_count(plan, owner, c->value) > 1)
			cell_raise_duplicate(c, c);
	}
	PopActiveSnapshot();
	foreach(lc, plans)
	{
		if (lfirst(lc) != NULL)
			SPI_freeplan(lfirst(lc));
	}
}

/* The table a TRUNCATE is emptying while its releases are claimed, if any. */
static Oid	cell_truncating = InvalidOid;

/* A claimed column of the cell, as claimed_attributes declares it. */
typedef struct CellClaimedColumn
{
	Oid			relid;
	AttrNumber	attnum;
	AttrNumber	subject_attnum;
	CellSourceKey source;
	char	   *bucket_type;
	char	   *subject_type;
	char	   *source_type;
	int			unique;			/* a unique index on it alone: 1, 0, -1 not asked yet */
} CellClaimedColumn;

/* Every claimed column of the cell, paused ones too (inside SPI_connect). */
static List *
cell_claimed_columns(void)
{
	List	   *columns = NIL;
	int			ret;

	ret = SPI_execute("SELECT c.table_name::pg_catalog.oid, c.attnum, c.subject_attnum,"
					  /* source_attnums from 1.5, through to_jsonb so that this also runs before */
					  " COALESCE(pg_catalog.translate(pg_catalog.to_jsonb(c) OPERATOR(pg_catalog.->>) 'source_attnums', '[]', '{}')::pg_catalog.int2[],"
					  "          ARRAY[c.source_attnum]),"
					  " c.bucket_type, c.subject_type, c.source_type"
					  " FROM claims_cell.claimed_attributes c", true, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: reading the claimed columns failed: %s", SPI_result_code_string(ret));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	d = SPI_tuptable->tupdesc;
		CellClaimedColumn *k = palloc0(sizeof(CellClaimedColumn));
		bool		isnull;

		k->relid = DatumGetObjectId(SPI_getbinval(t, d, 1, &isnull));
		k->attnum = DatumGetInt16(SPI_getbinval(t, d, 2, &isnull));
		k->subject_attnum = DatumGetInt16(SPI_getbinval(t, d, 3, &isnull));
		cell_source_key_from_array(DatumGetArrayTypeP(SPI_getbinval(t, d, 4, &isnull)), &k->source);
		k->bucket_type = SPI_getvalue(t, d, 5);
		k->subject_type = SPI_getvalue(t, d, 6);
		k->source_type = SPI_getvalue(t, d, 7);
		k->unique = -1;
		columns = lappend(columns, k);
	}
	return columns;
}

/*
 * A value is released only when no row of this cell holds it in any
 * claimed column of its bucket type, paused columns included, whoever owns
 * the table: two tables sharing a bucket type, rows a table held when its
 * column was declared, a delegated role's table holding a value of another
 * role's. A destroy in nets whose value such a row still holds becomes a
 * replace carrying that row's subject and source, so the store's record
 * names the row that holds it; the row is locked FOR SHARE until the
 * transaction ends, so it cannot go before the lease is committed. A
 * column with a unique index on it alone is not searched for the row that
 * released the value: no other row of it can hold that value. Inside the
 * claiming context (SPI, the extension's owner).
 */
static void
cell_keep_held_values(List *nets)
{
	List	   *columns = NIL;
	bool		read = false;
	ListCell   *lc;

	/*
	 * the latest row versions, as the two-holder check reads them (and
	 * locks them, so REPEATABLE READ meets no concurrent update)
	 */
	PushActiveSnapshot(GetLatestSnapshot());
	foreach(lc, nets)
	{
		CellNet    *n = lfirst(lc);
		CellChange *c = n->last;
		ListCell   *lc2;

		/* a value that did not exist before the transaction sends nothing */
		if (c->create || !n->existed)
			continue;
		if (!read)
		{
			columns = cell_claimed_columns();
			read = true;
		}
		foreach(lc2, columns)
		{
			CellClaimedColumn *k = lfirst(lc2);
			CellChange *h;
			char	   *source_id;
			int			source_len;
			int64		subject;

			if (strcmp(k->bucket_type, c->bucket_type) != 0 || k->relid == cell_truncating)
				continue;
			if (k->relid == c->relid && k->attnum == c->attnum)
			{
				/* asked once per call, not once per released value */
				if (k->unique < 0)
					k->unique = cell_column_is_unique(k->relid, k->attnum) ? 1 : 0;
				if (k->unique)
					continue;
			}
			if (!cell_holder_find(k->relid, k->attnum, k->subject_attnum, &k->source,
								  c->value, get_atttype(c->relid, c->attnum), cell_truncating,
								  GetActiveSnapshot(), &source_id, &source_len, &subject))
				continue;
			h = palloc(sizeof(CellChange));
			memcpy(h, c, sizeof(CellChange));
			h->create = true;
			h->relid = k->relid;
			h->attnum = k->attnum;
			h->column = get_attname(k->relid, k->attnum, false);
			h->subject_type = pstrdup(k->subject_type);
			h->subject_id = subject;
			h->source_type = pstrdup(k->source_type);
			h->source_id = source_id;
			h->source_len = source_len;
			n->last = h;
			n->existed = true;
			ereport(DEBUG1,
					(errmsg("claims_cell: value \"%s\" stays claimed for a row of table \"%s\"",
							c->value, get_rel_name(k->relid))));
			break;
		}
	}
	PopActiveSnapshot();
}

/* A new lease of this transaction with a fresh time-ordered uuid. */
static CellLease *
cell_new_lease(pg_uuid_t *uuid)
{
	MemoryContext old;
	CellLease  *l;

	if (cell_lease_cxt == NULL)
		cell_lease_cxt = AllocSetContextCreate(TopMemoryContext, "claims_cell leases",
											   ALLOCSET_SMALL_SIZES);
	claims_uuid7_fill(uuid, 1);
	old = MemoryContextSwitchTo(cell_lease_cxt);
	l = palloc0(sizeof(CellLease));
	l->level = GetCurrentTransactionNestLevel();
	strlcpy(l->uuid, DatumGetCString(DirectFunctionCall1(uuid_out, UUIDPGetDatum(uuid))),
			sizeof(l->uuid));
	cell_leases = lappend(cell_leases, l);
	MemoryContextSwitchTo(old);
	return l;
}

/*
 * Delete the rows of leases committed by earlier transactions. The uuids go
 * in as a uuid[] parameter: a text parameter cast in the query
 * ($1::text::uuid[]) is an I/O coercion the planner does not fold, so the
 * primary key could not be used and every writing transaction scanned the
 * whole table, dead rows and leases left for recovery included.
 */
static void
cell_flush_done_leases(void)
{
	StringInfoData arr;
	ListCell   *lc;
	Datum		arg;
	int			ret;

	if (cell_done_leases == NIL)
		return;
	initStringInfo(&arr);
	appendStringInfoChar(&arr, '{');
	foreach(lc, cell_done_leases)
		appendStringInfo(&arr, "%s%s", foreach_current_index(lc) > 0 ? "," : "",
						 (char *) lfirst(lc));
	appendStringInfoChar(&arr, '}');
	arg = OidInputFunctionCall(F_ARRAY_IN, arr.data, UUIDOID, -1);
	/*
	 * claims_cell.reconcile() may be deleting the same rows: skip the ones it
	 * holds rather than wait for its store calls (it deletes them, or a
	 * later pass does when it rolls back).
	 */
	ret = cell_stmt_execute(CELL_STMT_DELETE_DONE, &arg, false, 0);
	if (ret != SPI_OK_DELETE)
		elog(ERROR, "claims_cell: deleting finished leases failed: %s", SPI_result_code_string(ret));
	cell_done_flushing = list_length(cell_done_leases);
}

/*
 * Accept the store's answer to a lease's claims_begin_update that was not
 * a refusal, or raise (ABORT then rolls back what may exist). An answer
 * that came only after a try was given up is in doubt until a barrier at
 * the store shows it durable.
 */
static void
cell_lease_confirm(CellLease *lease, const CellCallResult *r)
{
	if (r->status != CELL_CALL_OK)
	{
		/* a lease may exist only if a request left */
		lease->sent = lease->in_doubt = r->sent;
		cell_raise_unreachable(r);
	}
	if (r->abandoned && !cell_store_barrier())
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the claims store at %s answered lease %s only after a try was given up, and could not confirm it durable",
						cell_server_label(), lease->uuid),
				 errdetail("The abandoned try may not be durable at the store (a wait for its synchronous standby may have been cancelled); the lease is rolled back."),
				 errhint("Nothing was claimed; retry.")));
	lease->in_doubt = false;
	if (r->value == NULL || strstr(r->value, lease->uuid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("the claims store answered with another lease than %s", lease->uuid),
				 errdetail("Answer: %s", r->value ? r->value : "NULL")));
	lease->taken = true;
}

/*
 * Take one lease on a list of folded values at the store, then record it
 * locally (as the extension's owner). Raises when the store refuses: the
 * abort rolls back every lease taken before. Destroys of values the store
 * does not hold are dropped and the rest asked for again.
 */
static CellLease *
cell_take_lease(List *nets, int64 cell_id, Oid owner, Oid save_user, int save_sec,
				List **taken)
{
	*taken = NIL;
	for (;;)
	{
		pg_uuid_t	uuid;
		CellLease  *lease = cell_new_lease(&uuid);
		int			ncreates,
					ndestroys;
		char	   *request = cell_request(nets, cell_id, lease->uuid, &ncreates, &ndestroys);
		CellCallResult r;
		const char *params[CELL_BEGIN_NPARAMS];

		lease->sent = true;
		lease->in_doubt = true; /* until the store answers: a cancel leaves it so */
		params[CELL_BEGIN_PARAM_REQUEST] = request;
		cell_stats_count(CELL_STAT_BEGIN_UPDATES);
		cell_call("SELECT %s.claims_begin_update($1::jsonb)", CELL_BEGIN_NPARAMS, params, true, &r);
		if (r.status == CELL_CALL_REMOTE_ERROR)
		{
			/* a refusal leaves no lease, unless an abandoned first try still runs */
			lease->sent = lease->in_doubt = r.abandoned;
			/* that try asked the same and is refused alike, or rolled back as in doubt */
			if (cell_drop_unclaimed(&nets, &r, cell_id, NULL))
			{
				if (nets == NIL)
					return NULL;
				continue;
			}
			cell_raise_refusal(nets, &r, cell_id);
		}
		cell_lease_confirm(lease, &r);
		cell_record_lease(lease, &uuid, request, owner, save_user, save_sec);
		*taken = nets;
		return lease;
	}
}

/*
 * Insert a taken lease's row into claims_cell.outstanding_leases as the
 * extension's owner (inside SPI_connect).
 */
static void
cell_record_lease(CellLease *lease, pg_uuid_t *uuid, const char *request, Oid owner,
				  Oid save_user, int save_sec)
{
	int			ret;

	SetUserIdAndSecContext(owner, save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	/*
	 * The uuid is new, so the only row it can meet is a fence of
	 * claims_cell.reconcile(), which inserts it before rolling back a lease
	 * it finds without a local row. ON CONFLICT waits for the fencing
	 * transaction: if it commits, the lease is being rolled back at the
	 * store and this transaction must not commit; if it aborts, the row
	 * goes in. (The fence may equally come second: it then waits for this
	 * transaction and, when it commits, commits the lease instead.)
	 */
	ret = cell_insert_lease_row(uuid, request);
	if (ret != SPI_OK_INSERT)
		elog(ERROR, "claims_cell: recording lease %s failed: %s", lease->uuid,
			 SPI_result_code_string(ret));
	if (SPI_processed != 1)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("lease %s was settled by reconciliation; retry the transaction",
						lease->uuid),
				 errdetail("claims_cell.reconcile() found the lease outstanding at the claims store"
						   " for longer than claims_cell.stale_after without a committed local row,"
						   " and fenced it to roll it back."),
				 errhint("Nothing was claimed; retry the transaction.")));
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * Take one lease of claims_cell.verify()'s repairs (creates and destroys are
 * JSON arrays of store records) and record it locally, inside the caller's
 * transaction: its COMMIT commits the lease, its ABORT (or the abort of the
 * subtransaction) rolls it back, and a crash leaves it to reconcile().
 * Returns true with the lease's uuid in lease_out; false when the store
 * refused, its answer in r. Raises when the store cannot be reached.
 */
bool
cell_take_repair_lease(int64 cell_id, const char *creates, const char *destroys,
					   char *lease_out, CellCallResult *r)
{
	pg_uuid_t	uuid;
	CellLease  *lease = cell_new_lease(&uuid);
	StringInfoData req;
	const char *params[CELL_BEGIN_NPARAMS];
	Oid			owner = cell_owner(false);
	Oid			save_user;
	int			save_sec;

	initStringInfo(&req);
	appendStringInfo(&req, "{\"cell_id\": %lld, \"lease_uuid\": \"%s\", "
					 "\"create_records\": %s, \"destroy_records\": %s}",
					 (long long) cell_id, lease->uuid, creates, destroys);
	cell_lease_cell_id = cell_id;
	lease->repair = true;
	lease->sent = lease->in_doubt = true;
	params[CELL_BEGIN_PARAM_REQUEST] = req.data;
	cell_stats_count(CELL_STAT_BEGIN_UPDATES);
	cell_call("SELECT %s.claims_begin_update($1::jsonb)", CELL_BEGIN_NPARAMS, params, true, r);
	if (r->status == CELL_CALL_REMOTE_ERROR)
	{
		lease->sent = lease->in_doubt = r->abandoned;
		cell_count_refusal(r);
		return false;
	}
	cell_lease_confirm(lease, r);
	GetUserIdAndSecContext(&save_user, &save_sec);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	cell_record_lease(lease, &uuid, req.data, owner, save_user, save_sec);
	SPI_finish();
	strlcpy(lease_out, lease->uuid, UUID_LEN * 2 + 5);
	return true;
}

/*
 * Savepoints: the leases a subtransaction took are rolled back at the
 * store when it rolls back (their local rows are gone with it), and handed
 * to the parent when it commits.
 */
static void
cell_leases_subxact(SubXactEvent event)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	foreach(lc, cell_leases)
	{
		CellLease  *l = lfirst(lc);

		if (l->level < level)
			continue;
		if (event == SUBXACT_EVENT_COMMIT_SUB)
			l->level = level - 1;
		else if (event == SUBXACT_EVENT_ABORT_SUB)
		{
			/* now, not by the worker: the transaction goes on and may verify again */
			if (l->sent)
				cell_finish_lease(l, false, false);
			l->gone = true;
			cell_leases = foreach_delete_current(cell_leases, lc);
		}
	}
	if (event == SUBXACT_EVENT_ABORT_SUB)
		cell_call_abort_ended();
}

/* Whether a lease still stands: not rolled back with a savepoint, not superseded. */
static bool
cell_lease_live(const CellLease *lease)
{
	return lease != NULL && !lease->gone;
}

/*
 * Enter the context claiming runs in: SPI, a snapshot that sees the last
 * statement, search_path pinned, as the extension's owner. False when the
 * extension is gone.
 */
static bool
cell_claim_enter(CellClaimCtx *cx)
{
	cx->owner = cell_owner(true);
	if (!OidIsValid(cx->owner))
		return false;
	GetUserIdAndSecContext(&cx->save_user, &cx->save_sec);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* the SQL below runs as the owner: no name may resolve in the user's schemas */
	cx->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	SetUserIdAndSecContext(cx->owner, cx->save_sec | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	return true;
}

/* Leave it. */
static void
cell_claim_leave(CellClaimCtx *cx)
{
	SetUserIdAndSecContext(cx->save_user, cx->save_sec);
	AtEOXact_GUC(true, cx->save_nestlevel);
	PopActiveSnapshot();
	SPI_finish();
}

/* Read the configuration (as the owner): the store's server and the cell id, or 55000. */
static void
cell_claim_configuration(CellClaimCtx *cx)
{
	bool		isnull;
	int			ret = cell_stmt_execute(CELL_STMT_CONFIGURATION, NULL, true, 1);

	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: reading the configuration failed: %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("claims_cell is not configured"),
				 errhint("Call claims_cell.configure(server_name, cell_id) first.")));
	cx->server_name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	cx->cell_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	/* a copy of a cell's database claims nothing: nothing reaches the store */
	cell_check_configuration_row();
}

/* Connect (as the caller, whose user mapping is used) for the leases. */
static void
cell_claim_connect(CellClaimCtx *cx)
{
	SetUserIdAndSecContext(cx->save_user, cx->save_sec);
	cell_conn_prepare(cell_server_oid(cx->server_name, false));
	cell_lease_cell_id = cx->cell_id;
}

/*
 * Take leases on folded values in chunks of at most max_batch_size records
 * and remember, for each value a lease carries, that lease: its changes of
 * state FLUSHING become LEASED.
 */
static void
cell_take_leases(CellClaimCtx *cx, List *nets)
{
	ListCell   *lc;

	foreach(lc, cell_split(nets, cell_max_batch_size))
	{
		List	   *taken;
		CellLease  *lease = cell_take_lease(lfirst(lc), cx->cell_id, cx->owner,
											cx->save_user, cx->save_sec, &taken);
		ListCell   *lc2;

		if (lease == NULL)
			continue;
		foreach(lc2, taken)
		{
			CellKey    *k = ((CellNet *) lfirst(lc2))->last->key;
			ListCell   *lc3;

			k->lease = lease;
			foreach(lc3, k->changes)
			{
				CellChange *c = lfirst(lc3);

				if (c->state == CELL_CHANGE_FLUSHING)
				{
					c->state = CELL_CHANGE_LEASED;
					c->lease = lease;
				}
			}
		}
	}
}

/* TRUNCATE statements running (nested in triggers or functions), per cell_truncate_utility. */
static int	cell_truncate_depth = 0;

/*
 * The end of a statement (and claims_cell.set_constraints('IMMEDIATE')):
 * claim the values its immediate changes touched, as a unique constraint
 * checks them. A value two rows hold fails the statement (23505); values
 * no lease of this transaction holds yet are leased now, in one call per
 * max_batch_size records, and a refusal fails the statement (its savepoint
 * rolls the leases back). A value an earlier statement's lease holds, or
 * with deferred changes, is only checked for two holders here: no other
 * cell can take it meanwhile, and its final state goes to the store at
 * COMMIT (the lease is superseded by one carrying it), so it is sent once.
 */
void
cell_claim_statement(void)
{
	List	   *news;
	List	   *keys = NIL;
	List	   *fresh = NIL;
	List	   *held_changes = NIL;
	List	   *nets;
	List	   *held_nets;
	CellClaimCtx cx;
	ListCell   *lc;

	/*
	 * a statement ending inside a TRUNCATE (a trigger's DML) leaves its
	 * changes to the TRUNCATE's end, when the tables it empties are empty
	 */
	if (cell_truncate_depth > 0)
		return;
	news = cell_take_new_changes();
	if (news == NIL)
		return;
	foreach(lc, news)
	{
		CellChange *c = lfirst(lc);

		if (c->state == CELL_CHANGE_NEW && !c->key->mark)
		{
			c->key->mark = true;
			keys = lappend(keys, c->key);
		}
	}
	foreach(lc, keys)
	{
		CellKey    *k = lfirst(lc);
		bool		held = cell_lease_live(k->lease);
		ListCell   *lc2;

		k->mark = false;
		foreach(lc2, k->changes)
			held |= ((CellChange *) lfirst(lc2))->state == CELL_CHANGE_DEFERRED;
		foreach(lc2, k->changes)
		{
			CellChange *c = lfirst(lc2);

			if (c->state == CELL_CHANGE_NEW)
			{
				c->state = held ? CELL_CHANGE_DEFERRED : CELL_CHANGE_FLUSHING;
				if (!held)
					fresh = lappend(fresh, c);
			}
			if (held && c->state != CELL_CHANGE_SETTLED)
				held_changes = lappend(held_changes, c);
		}
	}
	/* two rows ending the statement with one value: 23505 now */
	held_nets = cell_fold(held_changes);
	nets = cell_fold(fresh);
	if (nets != NIL || held_nets != NIL)
	{
		if (!cell_claim_enter(&cx))
		{
			cell_forget_changes();
			return;
		}
		cell_claim_configuration(&cx);
		cell_check_local_holders(held_nets);
		cell_check_local_holders(nets);
		cell_keep_held_values(nets);
		if (nets != NIL)
		{
			cell_claim_connect(&cx);
			cell_take_leases(&cx, nets);
		}
		cell_claim_leave(&cx);
	}
	foreach(lc, fresh)
	{
		CellChange *c = lfirst(lc);

		if (c->state == CELL_CHANGE_FLUSHING)
			c->state = CELL_CHANGE_SETTLED;
	}
}

static ProcessUtility_hook_type cell_prev_process_utility = NULL;

/*
 * The same for the releases a BEFORE TRUNCATE trigger collected. A TRUNCATE
 * that passed through cell_truncate_utility is claimed there, once the
 * statement has emptied all its tables: one TRUNCATE empties several (a
 * list, a partitioned table's partitions, CASCADE), all their BEFORE
 * TRUNCATE triggers fire before any is emptied, and a row of one must not
 * keep claimed a value a row of another released. Otherwise (the library
 * was loaded by this statement) at once: the rows of the table it empties
 * hold no value any more, though they are still there to read.
 */
void
cell_claim_truncate(Oid relid)
{
	if (cell_truncate_depth > 0)
		return;
	cell_truncating = relid;
	PG_TRY();
	{
		cell_claim_statement();
	}
	PG_FINALLY();
	{
		cell_truncating = InvalidOid;
	}
	PG_END_TRY();
}

/*
 * ProcessUtility hook: the releases the BEFORE TRUNCATE triggers of a
 * TRUNCATE collected are claimed at the end of the statement, when every
 * table it names (and their partitions, children and, with CASCADE, the
 * tables referencing them) is empty, so that no row of them counts as one
 * still holding a released value.
 */
static void
cell_truncate_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
					  ProcessUtilityContext context, ParamListInfo params,
					  QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	bool		truncate = IsA(pstmt->utilityStmt, TruncateStmt);

	if (truncate)
		cell_truncate_depth++;
	PG_TRY();
	{
		if (cell_prev_process_utility)
			cell_prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
									  queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
									queryEnv, dest, qc);
	}
	PG_FINALLY();
	{
		if (truncate)
			cell_truncate_depth--;
	}
	PG_END_TRY();
	if (truncate)
		cell_claim_statement();
}

/* Install cell_truncate_utility (_PG_init). */
void
cell_truncate_hook_init(void)
{
	cell_prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = cell_truncate_utility;
}

/*
 * Replace a statement's lease whose values changed again later in the
 * transaction with leases carrying their final state (nets, folded over
 * every change of those values), in one transaction at the store: the
 * old lease is rolled back and the new ones begun together, so the values
 * are never free in between, and a refusal leaves the old lease as it
 * was. The old lease's local row goes, the new ones' rows come.
 */
static void
cell_supersede_lease(CellClaimCtx *cx, CellLease *old, List *nets)
{
	for (;;)
	{
		List	   *chunks = cell_split(nets, cell_max_batch_size);
		List	   *leases = NIL;
		List	   *requests = NIL;
		pg_uuid_t  *uuids = palloc0(sizeof(pg_uuid_t) * (list_length(chunks) + 1));
		StringInfoData arr;
		CellCallResult r;
		char		cell_id[32];
		const char *params[CELL_SUPERSEDE_NPARAMS];
		ListCell   *lc;
		Oid			argtype = UUIDOID;
		Datum		arg;

		initStringInfo(&arr);
		appendStringInfoChar(&arr, '[');
		foreach(lc, chunks)
		{
			int			i = foreach_current_index(lc);
			CellLease  *l = cell_new_lease(&uuids[i]);
			int			ncreates,
						ndestroys;
			char	   *request = cell_request(lfirst(lc), cx->cell_id, l->uuid, &ncreates, &ndestroys);

			l->sent = l->in_doubt = true;
			leases = lappend(leases, l);
			requests = lappend(requests, request);
			appendStringInfo(&arr, "%s%s", i > 0 ? ", " : "", request);
			cell_stats_count(CELL_STAT_BEGIN_UPDATES);
		}
		appendStringInfoChar(&arr, ']');
		snprintf(cell_id, sizeof(cell_id), "%lld", (long long) cx->cell_id);
		params[CELL_SUPERSEDE_PARAM_CELL_ID] = cell_id;
		params[CELL_SUPERSEDE_PARAM_OLD_LEASE] = old->uuid;
		params[CELL_SUPERSEDE_PARAM_REQUESTS] = arr.data;
		cell_call("WITH rb AS MATERIALIZED (SELECT %s.claims_rollback($1::bigint, $2::uuid)::pg_catalog.text AS done),"
				  " nb AS MATERIALIZED (SELECT %s.claims_begin_update(q.r) AS b"
				  "   FROM rb, pg_catalog.jsonb_array_elements($3::jsonb) AS q(r))"
				  " SELECT pg_catalog.concat((SELECT pg_catalog.count(*) FROM rb), ' ',"
				  " (SELECT pg_catalog.string_agg(nb.b::pg_catalog.text, ' ') FROM nb))",
				  CELL_SUPERSEDE_NPARAMS, params, true, &r);
		if (r.status != CELL_CALL_OK)
		{
			/* the store's transaction did all or nothing; the old lease may be gone */
			foreach(lc, leases)
			{
				CellLease  *l = lfirst(lc);

				l->sent = l->in_doubt = r.status == CELL_CALL_REMOTE_ERROR ? r.abandoned : r.sent;
			}
		}
		if (r.status == CELL_CALL_REMOTE_ERROR)
		{
			if (cell_drop_unclaimed(&nets, &r, cx->cell_id, old->uuid))
				continue;
			cell_raise_refusal(nets, &r, cx->cell_id);
		}
		foreach(lc, leases)
		{
			cell_lease_confirm(lfirst(lc), &r);
			r.abandoned = false;	/* one barrier confirms them all */
		}
		old->gone = true;
		old->sent = old->taken = false;
		SetUserIdAndSecContext(cx->owner, cx->save_sec | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		arg = DirectFunctionCall1(uuid_in, CStringGetDatum(old->uuid));
		if (SPI_execute_with_args("DELETE FROM claims_cell.outstanding_leases WHERE uuid OPERATOR(pg_catalog.=) $1",
								  1, &argtype, &arg, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "claims_cell: deleting the row of lease %s failed", old->uuid);
		SetUserIdAndSecContext(cx->save_user, cx->save_sec);
		foreach(lc, leases)
			cell_record_lease(lfirst(lc), &uuids[foreach_current_index(lc)],
							  list_nth(requests, foreach_current_index(lc)),
							  cx->owner, cx->save_user, cx->save_sec);
		return;
	}
}

/*
 * PRE_COMMIT: take the transaction's leases at the store, recording each
 * locally. Raises (and so aborts the commit) when the store refuses. The
 * changes not leased by their statements (deferred ones) are folded and
 * leased; a statement's lease whose values changed again is superseded by
 * leases of their final state.
 */
static void
cell_pre_commit(void)
{
	List	   *rest = NIL;
	List	   *dirty = NIL;
	List	   *dirty_nets = NIL;
	bool		flush = cell_done_leases != NIL && !XactReadOnly &&
		!IsolationUsesXactSnapshot() &&
		TransactionIdIsValid(GetTopTransactionIdIfAny());
	List	   *nets;
	CellClaimCtx cx;
	ListCell   *lc;
	ListCell   *lcn;
	Oid			live_relid = InvalidOid;	/* the last table seen to exist */

	foreach(lc, cell_pending_changes())
	{
		CellChange *c = lfirst(lc);
		CellLease  *l = c->key->lease;

		if (c->state == CELL_CHANGE_SETTLED)
			continue;
		if (c->state == CELL_CHANGE_LEASED)
		{
			/* a table dropped since claims and releases nothing: supersede */
			if (c->relid != live_relid &&
				!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(c->relid)))
			{
				if (cell_lease_live(c->lease) && !c->lease->dirty)
					dirty = lappend(dirty, c->lease);
				if (cell_lease_live(c->lease))
					c->lease->dirty = true;
			}
			else
				live_relid = c->relid;
			continue;
		}
		if (cell_lease_live(l))
		{
			if (!l->dirty)
				dirty = lappend(dirty, l);
			l->dirty = true;
		}
		else
			rest = lappend(rest, c);
	}
	if (rest == NIL && dirty == NIL && !flush)
		return;
	if (!cell_claim_enter(&cx))
	{
		/* the extension is gone: nothing to claim any more */
		cell_forget_changes();
		return;
	}
	nets = cell_fold(rest);
	foreach(lc, dirty)
	{
		CellLease  *l = lfirst(lc);
		List	   *changes = NIL;
		ListCell   *lc2;

		/*
		 * every change of its values, the leased ones included; the values
		 * are found through the changes, since a savepoint rolled back
		 * rebuilds the records
		 */
		List	   *keys = NIL;

		foreach(lc2, cell_pending_changes())
		{
			CellKey    *k = ((CellChange *) lfirst(lc2))->key;

			if (k->lease == l && !k->mark)
			{
				k->mark = true;
				keys = lappend(keys, k);
			}
		}
		foreach(lc2, keys)
		{
			CellKey    *k = lfirst(lc2);
			ListCell   *lc3;

			k->mark = false;
			foreach(lc3, k->changes)
			{
				if (((CellChange *) lfirst(lc3))->state != CELL_CHANGE_SETTLED)
					changes = lappend(changes, lfirst(lc3));
			}
		}
		list_free(keys);
		dirty_nets = lappend(dirty_nets, cell_fold(changes));
	}
	if (flush)
		cell_flush_done_leases();
	if (nets == NIL && dirty == NIL)
	{
		cell_claim_leave(&cx);
		return;
	}
	cell_claim_configuration(&cx);
	cell_check_local_holders(nets);
	foreach(lc, dirty_nets)
		cell_check_local_holders(lfirst(lc));
	cell_keep_held_values(nets);
	foreach(lc, dirty_nets)
		cell_keep_held_values(lfirst(lc));
	cell_claim_connect(&cx);
	forboth(lc, dirty, lcn, dirty_nets)
		cell_supersede_lease(&cx, lfirst(lc), lfirst(lcn));
	foreach(lc, cell_split(nets, cell_max_batch_size))
	{
		List	   *taken;

		(void) cell_take_lease(lfirst(lc), cx.cell_id, cx.owner, cx.save_user, cx.save_sec, &taken);
	}
	cell_claim_leave(&cx);
}

/*
 * After the local commit or abort: commit or roll back the lease at the
 * store, or with hand_off leave it to the worker when finish_leases_in
 * says so. It runs only what cannot raise (libpq, plain C, WARNINGs; the
 * call is not interruptible), rather than catching: a failure is a WARNING
 * and recovery finishes the lease later (its local row stays after a commit).
 */
static void
cell_finish_lease(CellLease *lease, bool commit, bool hand_off)
{
	const char *cell_lease = lease->uuid;
	CellCallResult r;
	char		cell_id[32];
	const char *params[2];

	/* the worker finishes it, when there is one for this database */
	if (hand_off && cell_finish_leases_in == CELL_FINISH_IN_WORKER &&
		cell_worker_push(cell_lease, commit ? 'c' : lease->in_doubt ? 'R' : 'r'))
		return;

	snprintf(cell_id, sizeof(cell_id), "%lld", (long long) cell_lease_cell_id);
	params[0] = cell_id;
	params[1] = cell_lease;
	cell_call_finish(commit ? "SELECT %s.claims_commit($1::bigint, $2::uuid)"
					 : "SELECT %s.claims_rollback($1::bigint, $2::uuid)",
					 2, params, false, &r);
	if (r.status == CELL_CALL_OK && commit && r.abandoned && !cell_store_barrier())
		ereport(WARNING,
				(errmsg("claims_cell: lease %s was committed at the claims store only after a try was given up, and could not be confirmed durable",
						cell_lease),
				 errdetail("The local transaction committed; the lease stays in claims_cell.outstanding_leases until recovery commits it again.")));
	else if (r.status == CELL_CALL_OK)
	{
		cell_stats_count(commit ? CELL_STAT_COMMITS : CELL_STAT_ROLLBACKS);
		/* the worker deletes the local row, or this backend's next transaction */
		if (commit && !cell_worker_push(cell_lease, 'd'))
		{
			MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

			if (list_length(cell_done_leases) >= CELL_DONE_MAX)
			{
				pfree(linitial(cell_done_leases));
				cell_done_leases = list_delete_first(cell_done_leases);
			}
			cell_done_leases = lappend(cell_done_leases, pstrdup(cell_lease));
			MemoryContextSwitchTo(old);
		}
	}
	else if (r.status == CELL_CALL_REMOTE_ERROR && !commit && strcmp(r.sqlstate, CLAIMS_SQLSTATE_NOT_FOUND) == 0 &&
			 !lease->in_doubt)
	{
		/* the begin never reached the store: nothing to roll back */
	}
	else
	{
		/*
		 * A refusal is final; anything else the worker tries again at once,
		 * including an error of a fresh connection's setup (r.connecting):
		 * that try never sent the request. An earlier try given up
		 * (r.abandoned) may have been applied; the worker's finish is then
		 * a repeat, which the store answers as done once it is durable.
		 */
		bool		handed = (r.status != CELL_CALL_REMOTE_ERROR || r.connecting ||
							  (!commit && strcmp(r.sqlstate, CLAIMS_SQLSTATE_NOT_FOUND) == 0)) &&
			cell_worker_push(cell_lease, commit ? 'c' : lease->in_doubt ? 'R' : 'r');

		ereport(WARNING,
				(errmsg("claims_cell: could not %s lease %s at the claims store: %s",
						commit ? "commit" : "roll back", cell_lease,
						r.message ? r.message : "unknown failure"),
				 handed
				 ? (commit
					? errdetail("The local transaction committed; the background worker commits the lease.")
					: errdetail("The background worker rolls the lease back."))
				 : (commit
					? errdetail("The local transaction committed; the lease stays in claims_cell.outstanding_leases until recovery commits it.")
					: errdetail("The lease stays outstanding at the store until recovery rolls it back."))));
	}
}

/*
 * Commit (taken leases) or roll back (leases that may exist) at the store.
 * A committing transaction rolls back the leases it sent but that were
 * refused (verify() carries on after a refusal): a lost first try may
 * have created them.
 */
static void
cell_finish_leases(bool commit)
{
	ListCell   *lc;

	foreach(lc, cell_leases)
	{
		CellLease  *l = lfirst(lc);

		if (l->taken || l->sent)
			cell_finish_lease(l, commit && l->taken, true);
	}
}

/* Forget the transaction's leases and changes. */
static void
cell_reset(void)
{
	cell_leases = NIL;
	if (cell_lease_cxt)
		MemoryContextReset(cell_lease_cxt);
	cell_forget_changes();
}

/* Whether every lease of this transaction is a verify() repair's. */
static bool
cell_leases_all_repairs(void)
{
	ListCell   *lc;

	foreach(lc, cell_leases)
	{
		if (!((CellLease *) lfirst(lc))->repair)
			return false;
	}
	return true;
}

/*
 * Subtransaction callback: a savepoint's leases first (rolled back at the
 * store, or handed to the parent), then its changes.
 */
void
cell_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	cell_leases_subxact(event);
	cell_changes_subxact(event, cell_lease_live);
}

/* Transaction callback: the protocol's steps at the transaction's ends. */
void
cell_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			cell_pre_commit();
			/* the store must never hold a lease of a commit a crash can lose */
			if (cell_leases != NIL)
				ForceSyncCommit();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (cell_has_pending() && cell_leases == NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that changed claimed values"),
						 errdetail("Claims are taken at COMMIT; a prepared transaction cannot take them.")));
			if (cell_leases != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 cell_leases_all_repairs() ?
						 errmsg("cannot prepare a transaction that holds leases of claims_cell.verify() repairs") :
						 errmsg("cannot prepare a transaction that changed claimed values"),
						 errdetail("Its leases are committed at the store at COMMIT; a prepared transaction would leave them outstanding.")));
			break;
		case XACT_EVENT_COMMIT:
			if (cell_done_flushing > 0)
			{
				for (int i = 0; i < cell_done_flushing; i++)
					pfree(list_nth(cell_done_leases, i));
				cell_done_leases = list_delete_first_n(cell_done_leases, cell_done_flushing);
				cell_done_flushing = 0;
			}
			cell_finish_leases(true);
			cell_reset();
			break;
		case XACT_EVENT_ABORT:
			cell_done_flushing = 0;
			cell_finish_leases(false);
			cell_reset();
			cell_call_abort_ended();
			break;
		case XACT_EVENT_PREPARE:
			cell_done_flushing = 0;
			cell_reset();
			break;
		default:
			break;
	}
}
