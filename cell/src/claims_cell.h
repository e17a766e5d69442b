/*-------------------------------------------------------------------------
 *
 * claims_cell.h
 *	  Shared declarations of the claims_cell extension: the cell side of
 *	  the claims store (collect changes of claimed columns, take one lease
 *	  at COMMIT, finish it after the local commit).
 *
 * Calls between the files go one way, down this list (none calls back):
 *
 *   claims_cell.c  _PG_init, GUCs -> xact, worker, connection, breaker
 *   columns.c      declarations -> triggers, xact, identity, partitions,
 *                  sourcekey, connection, fdw
 *   triggers.c     trigger entry points -> xact, collect
 *   verify.c, compare.c, reconcile.c -> xact, identity, listing,
 *                  connection, fdw, breaker
 *   xact.c         the lease protocol -> collect, holders, identity,
 *                  sourcekey, worker, connection, fdw, breaker
 *   collect.c      the change log -> partitions, sourcekey
 *   worker.c       -> connection, fdw, breaker
 *   connection.c   calls to the store -> breaker, fdw
 *   holders.c, partitions.c -> sourcekey; stats.c -> breaker
 *
 * identity.c, listing.c, sourcekey.c, fdw.c and breaker.c call no other.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CLAIMS_CELL_H
#define CLAIMS_CELL_H

#include "postgres.h"

#include "library_local.h"
#include "uuid7.h"

#include "access/htup.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/array.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

/* Longest value the store accepts, in characters. */
#define CELL_MAX_VALUE_CHARS	1024
/* Longest source id the store accepts, in bytes. */
#define CELL_MAX_SOURCE_ID		128

/*
 * The arguments of a claimed column's claims_cell.collect() row trigger,
 * as claim_column writes them (attribute numbers are the declared
 * table's). Triggers made before 1.4 have no mode and are deferred.
 */
typedef enum CellTriggerArg
{
	CELL_TRIGGER_ARG_ATTNUM,	/* the claimed column */
	CELL_TRIGGER_ARG_BUCKET_TYPE,
	CELL_TRIGGER_ARG_SUBJECT_TYPE,
	CELL_TRIGGER_ARG_SUBJECT_ATTNUM,
	CELL_TRIGGER_ARG_SOURCE_TYPE,
	CELL_TRIGGER_ARG_SOURCE_KEY,	/* "1", or "1,3": the primary key's columns */
	CELL_TRIGGER_ARG_INTEGER_VALUED,	/* 't' or 'f' */
	CELL_TRIGGER_ARG_MODE,		/* 1.4: 'i', 'd' or 'e' */
	CELL_TRIGGER_NARGS_MODE		/* how many a trigger with a mode has */
} CellTriggerArg;

/* How many a trigger made before 1.4 has (deferred, no mode). */
#define CELL_TRIGGER_NARGS CELL_TRIGGER_ARG_MODE

/* GUCs (claims_cell.c) */
extern int	cell_call_timeout_ms;
extern int	cell_connect_timeout_ms;
extern int	cell_max_concurrent_calls;
extern int	cell_breaker_threshold;
extern int	cell_breaker_cooldown_ms;
extern int	cell_breaker_probe_interval_ms;
extern int	cell_max_batch_size;
extern int	cell_stale_after_s;
extern int	cell_orphan_after_s;
extern int	cell_cleanup_after_s;
extern int	cell_verify_recent_s;
extern int	cell_verify_interval_s;

/* worker.c: the background worker and its queue */
typedef enum CellFinishIn
{
	CELL_FINISH_IN_COMMIT,		/* the commit/abort callback calls the store */
	CELL_FINISH_IN_WORKER		/* the callback hands the lease to the worker */
} CellFinishIn;

extern char *cell_worker_database;
extern int	cell_reconcile_interval_s;
extern int	cell_finish_leases_in;
extern void cell_worker_define_gucs(void);
extern void cell_worker_register(void);
extern void cell_worker_shmem_request(void);
extern void cell_worker_shmem_startup(void);
extern bool cell_worker_push(const char *uuid, char action);

struct CellLease;				/* one lease of the transaction (xact.c) */
struct CellKey;

/*
 * Where a change stands. Immediate changes are NEW until the end of their
 * statement, then LEASED (under a lease taken then), SETTLED (nothing to
 * claim: created and gone within the statement, or a release of a value
 * the store did not hold) or DEFERRED (to COMMIT: the value is under a
 * lease of an earlier statement, or has deferred changes). FLUSHING only
 * while a statement's leases are being taken.
 */
typedef enum CellChangeState
{
	CELL_CHANGE_NEW,
	CELL_CHANGE_DEFERRED,
	CELL_CHANGE_FLUSHING,
	CELL_CHANGE_LEASED,
	CELL_CHANGE_SETTLED
} CellChangeState;

/* One change of a claimed value, recorded by the row trigger (collect.c). */
typedef struct CellChange
{
	bool		create;			/* create (new value) or destroy (old value) */
	bool		deferrable;		/* its column may be switched to deferred */
	CellChangeState state;
	struct CellLease *lease;	/* LEASED: the lease that carries it */
	struct CellKey *key;		/* every change of its value */
	int			level;			/* transaction nesting level that made it */
	Oid			relid;			/* table and column, for messages */
	AttrNumber	attnum;			/* the column (names change, numbers stay) */
	char	   *column;
	char	   *bucket_type;
	char	   *value;
	char	   *subject_type;
	int64		subject_id;
	char	   *source_type;
	char	   *source_id;		/* the row's primary key, creates and destroys */
	int			source_len;
} CellChange;

/* Every change of one claimed value ("TYPE=value") in the transaction. */
typedef struct CellKey
{
	char	   *key;
	List	   *changes;		/* CellChange, in order */
	struct CellLease *lease;	/* the live lease holding the value, or NULL */
	bool		mark;			/* scratch flag of one pass */
} CellKey;

/* The columns of a source id: a table's primary key, in key order. */
typedef struct CellSourceKey
{
	int			n;
	AttrNumber	attnums[INDEX_MAX_KEYS];
} CellSourceKey;

/* What a collect() row trigger of a table claims (partitions.c). */
typedef struct CellTriggerColumns
{
	Oid			declared;		/* the table claim_column declared */
	AttrNumber	declared_attnum;	/* the column, in the declared table */
	AttrNumber	attnum;			/* the column, in the trigger's table */
	AttrNumber	subject_attnum; /* in the trigger's table */
	CellSourceKey source;		/* in the trigger's table */
} CellTriggerColumns;

/* sourcekey.c */
extern bool cell_is_integer_type(Oid typid);
extern void cell_source_key_parse(const char *arg, CellSourceKey *key);
extern char *cell_source_key_arg(const CellSourceKey *key);
extern void cell_source_key_from_array(ArrayType *arr, CellSourceKey *key);
extern void cell_source_key_of_table(Relation rel, CellSourceKey *key);
extern char *cell_source_id(Relation rel, HeapTuple tuple, const CellSourceKey *key, int *len);
extern void cell_source_id_sql(StringInfo sql, TupleDesc desc, const CellSourceKey *key,
							   const char *alias, const char *table);

/* partitions.c */
extern void cell_trigger_columns(Relation rel, Trigger *trigger, CellTriggerColumns *out);
extern Trigger *cell_next_claim_trigger(Relation rel, Oid collect, int *i, CellTriggerColumns *m);
extern void cell_sync_table_triggers(Oid relid, Oid collect);
extern void cell_sync_tree_triggers(Oid relid, Oid collect);
extern void cell_check_free_in_partitions(Oid relid, const char *column, Oid collect);
extern List *cell_partitions_named(Node *parsetree, List **detached);
extern void cell_note_detached(Node *parsetree, List *named, List *detached, Oid collect);

/* collect.c: the transaction's change log */
extern List *cell_pending_changes(void);
extern List *cell_take_new_changes(void);
extern void cell_defer_changes(Oid relid, AttrNumber attnum, bool deferred);
extern void cell_record_create(Relation rel, Trigger *trigger, HeapTuple tuple);
extern void cell_record_destroy(Relation rel, Trigger *trigger, HeapTuple tuple);
extern void cell_record_update(Relation rel, Trigger *trigger, HeapTuple oldt, HeapTuple newt);
extern bool cell_has_pending(void);
extern void cell_forget_changes(void);
extern void cell_changes_subxact(SubXactEvent event,
								 bool (*lease_live) (const struct CellLease *lease));
extern bool cell_value_is_blank(const char *s);
extern bool cell_is_canonical_int64(const char *s);
extern char *cell_claimed_text(Relation rel, HeapTuple tuple, int attnum);

/* holders.c: rows of a claimed column holding a value */
extern struct _SPI_plan *cell_holders_count_plan(Oid relid, AttrNumber attnum, Oid *owner);
extern int64 cell_holders_count(struct _SPI_plan *plan, Oid owner, const char *value);
extern bool cell_column_is_unique(Oid relid, AttrNumber attnum);
extern bool cell_holder_find(Oid relid, AttrNumber attnum, AttrNumber subject_attnum,
							 const CellSourceKey *source, const char *value, Oid value_type,
							 Oid excluded, Snapshot snapshot, char **source_id,
							 int *source_len, int64 *subject);

/*
 * identity.c: the configuration, and what identifies the database it was
 * made in (NULL before the 1.4 update; read through to_jsonb so that the
 * statement also runs before it).
 */
#define CELL_CONFIGURATION_SQL \
	"SELECT c.server_name::pg_catalog.text, c.cell_id," \
	" CAST(pg_catalog.to_jsonb(c) OPERATOR(pg_catalog.->>) 'system_identifier' AS pg_catalog.int8)," \
	" CAST(pg_catalog.to_jsonb(c) OPERATOR(pg_catalog.->>) 'database_oid' AS pg_catalog.oid)" \
	" FROM claims_cell.configuration c"
extern void cell_check_identity(int64 cell_id, bool known, int64 sysid, Oid dboid);
extern void cell_check_configuration_row(void);
extern void cell_require_identity(void);

/* triggers.c */
extern Oid	cell_collect_oid(bool missing_ok);

/* xact.c */
extern void cell_xact_callback(XactEvent event, void *arg);
extern void cell_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								  SubTransactionId parentSubid, void *arg);
extern Oid	cell_extension_owner(void);
extern void cell_claim_statement(void);
extern void cell_claim_truncate(Oid relid);
extern void cell_truncate_hook_init(void);

/* fdw.c */
extern Oid	cell_server_oid(const char *server_name, bool missing_ok);
extern void cell_conn_options(Oid serverid, Oid userid, List **keywords, List **values,
							  bool *need_password);

/* connection.c: calls to the store with a deadline */
typedef enum CellCallStatus
{
	CELL_CALL_OK,				/* the store answered with rows */
	CELL_CALL_REMOTE_ERROR,		/* the store answered with an error */
	CELL_CALL_UNREACHABLE,		/* connection failed or was lost */
	CELL_CALL_TIMEOUT,			/* the deadline passed */
	CELL_CALL_BREAKER_OPEN,		/* failing fast: the store is down */
	CELL_CALL_BUSY,				/* too many concurrent calls */
	CELL_CALL_INTERRUPTED		/* a cancel or terminate request ended it */
} CellCallStatus;

typedef struct CellCallResult
{
	CellCallStatus status;
	char	   *value;			/* first column of the first row, or NULL */
	char		sqlstate[6];	/* remote error */
	char	   *message;		/* remote error, or what went wrong locally */
	char	   *detail;
	char	   *hint;
	int			tries;
	bool		sent;			/* a request may have reached the store */
	bool		abandoned;		/* a try sent it, then was given up */
	bool		connecting;		/* its last try failed while connecting */
} CellCallResult;

extern void cell_conn_prepare(Oid serverid);
extern void cell_conn_load_options(const char *packed);
extern pgsocket cell_conn_socket(void);
extern bool cell_conn_take_notifications(const char *channel, int64 cell_id);
extern void cell_call(const char *function, int nparams, const char *const *params,
					  bool interruptible, CellCallResult *result);
extern void cell_call_finish(const char *function, int nparams, const char *const *params,
							 bool interruptible, CellCallResult *result);
extern void cell_call_abort_ended(void);
extern const char *cell_store_schema(void);
extern void cell_conn_init(void);
extern char *cell_server_label(void);
extern void cell_raise_unreachable(const CellCallResult *r) pg_attribute_noreturn();
extern void cell_raise_remote(const CellCallResult *r, const char *what) pg_attribute_noreturn();
extern char *cell_call_listing_text(const char *server, Datum request, const char *function,
									const char *what);
extern Datum cell_call_listing(const char *server, Datum request, const char *function,
							   const char *what);

/*
 * The positional parameters of the store statements that begin leases
 * (xact.c): the begin statement, claims_begin_update($1), and the one that
 * supersedes a lease, claims_rollback($1, $2) then claims_begin_update of
 * every element of $3, in one transaction at the store.
 */
typedef enum CellBeginParam
{
	CELL_BEGIN_PARAM_REQUEST,	/* the lease's request (jsonb) */
	CELL_BEGIN_NPARAMS
} CellBeginParam;

typedef enum CellSupersedeParam
{
	CELL_SUPERSEDE_PARAM_CELL_ID,	/* this cell's id */
	CELL_SUPERSEDE_PARAM_OLD_LEASE, /* the lease rolled back */
	CELL_SUPERSEDE_PARAM_REQUESTS,	/* the new leases' requests (a jsonb array) */
	CELL_SUPERSEDE_NPARAMS
} CellSupersedeParam;

/* xact.c: the leases of claims_cell.verify()'s repairs */
extern bool cell_take_repair_lease(int64 cell_id, const char *creates, const char *destroys,
								   char *lease_out, CellCallResult *r);

/* listing.c: the store's listing pages, read from their text */
typedef struct VerifyRecord
{
	char	   *bucket_type;
	char	   *value;
	char	   *sid;			/* the source id: base64 as listed, hex once compared */
	char	   *subject_type;
	char	   *subject_id;
	char	   *source_type;
	char	   *status;
	char	   *updated_at;
	const char *text;			/* the record's JSON text, for "changed" */
	int			textlen;
} VerifyRecord;

typedef struct VerifyRecords
{
	VerifyRecord *recs;
	int			n;
	int			cap;
} VerifyRecords;

extern void listing_read_page(const char *text, int len, VerifyRecords *out,
							  bool *truncated, char **last_sid);

/* breaker.c: circuit breaker and statistics, shared or per backend */
typedef enum CellStat
{
	CELL_STAT_CALLS,
	CELL_STAT_BEGIN_UPDATES,
	CELL_STAT_COMMITS,
	CELL_STAT_ROLLBACKS,
	CELL_STAT_CONFLICTS_PERMANENT,
	CELL_STAT_CONFLICTS_TEMPORARY,
	CELL_STAT_REFUSALS,
	CELL_STAT_FAILURES,
	CELL_STAT_TIMEOUTS,
	CELL_STAT_BREAKER_REJECTIONS,
	/* the background worker's reconcile() passes (1.2) */
	CELL_STAT_RECONCILE_PASSES,
	CELL_STAT_RECONCILE_COMMITTED,
	CELL_STAT_RECONCILE_ROLLED_BACK,
	CELL_STAT_RECONCILE_ORPHANS,
	/* the background worker's verifications (1.3) */
	CELL_STAT_VERIFY_RUNS,
	CELL_STAT_VERIFY_MISSING,
	CELL_STAT_VERIFY_EXTRA,
	CELL_STAT_VERIFY_DRIFTED,
	CELL_STAT_VERIFY_REPAIRED,
	/* destroys of values the store did not hold (1.4) */
	CELL_STAT_UNCLAIMED_DESTROYS,
	/* the background worker's reconcile() passes that failed (1.4) */
	CELL_STAT_RECONCILE_FAILURES,
	CELL_STAT_COUNT
} CellStat;

typedef struct CellStatsSnapshot
{
	bool		shared;
	uint64		counters[CELL_STAT_COUNT];
	const char *breaker_state;
	int			in_flight;
	double		latency_sum_ms;
	uint64		latency_n;
	double		latency_max_ms;
	TimestampTz last_reconcile; /* 0: never */
	TimestampTz last_verify;	/* 0: never */
} CellStatsSnapshot;

extern void cell_breaker_shmem_request(void);
extern void cell_breaker_shmem_startup(void);
extern CellCallStatus cell_breaker_enter(bool *probe, bool finishing);
extern void cell_breaker_leave(int outcome, bool probe, double elapsed_ms);
extern void cell_stats_count(CellStat stat);
extern void cell_stats_reconcile(int64 committed, int64 rolled_back, int64 orphans_deleted, int64 pending);
extern void cell_stats_verify(int64 missing, int64 extra, int64 drifted, int64 repaired);
extern void cell_stats_read(CellStatsSnapshot *snap);
extern bool cell_breaker_is_shared(void);
extern uint32 cell_host_failures(uint32 key);
extern void cell_host_failed(uint32 key);
extern void cell_host_accepted(uint32 key);
extern uint32 cell_host_preferred(void);

#endif							/* CLAIMS_CELL_H */
