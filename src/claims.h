/*-------------------------------------------------------------------------
 *
 * claims.h
 *	  Shared declarations of the claims extension: request structures,
 *	  registries, JSON helpers and the prepared statements.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CLAIMS_H
#define CLAIMS_H

#include "postgres.h"

#include "library_local.h"
#include "refusal.h"
#include "uuid7.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"
#include "utils/uuid.h"

#define CLAIMS_DIGEST_LEN			32
#define CLAIMS_MAX_VALUE_CHARS		1024
#define CLAIMS_MAX_SOURCE_ID_BYTES	128
#define CLAIMS_LEASES_DEFAULT_LIMIT	100
#define CLAIMS_LEASES_MAX_LIMIT		1000
#define CLAIMS_RECORDS_DEFAULT_LIMIT 1000
#define CLAIMS_RECORDS_MAX_LIMIT	1000

/* claims.c: settings (claims.open_mode sets auth.c's claims_open_mode) */
extern int	claims_max_batch_size;

/* Values of claims.json_output: how responses are written. */
typedef enum ClaimsJsonOutput
{
	CLAIMS_JSON_OUTPUT_COMPAT = 0,	/* snake_case, bare uuid strings, defaults written */
	CLAIMS_JSON_OUTPUT_PROTO3		/* the proto3 JSON printer's own output */
} ClaimsJsonOutput;

extern int	claims_json_output;

/* auth.c: which role may act for which cell */
extern bool claims_open_mode;
extern void claims_cells_invalidate(Oid relid);
extern bool claims_caller_is_admin(void);
extern void claims_authorize_cell(int64 cell_id, bool for_new_lease);
extern void claims_authorize_lookup(void);
extern void claims_authorize_get_cells(void);

/* auth.c: the cell registry as the per-backend cache holds it */
typedef struct ClaimsCell
{
	int64		cell_id;
	char	   *role_name;
	bool		disabled;
	char	   *address;		/* NULL when unset */
	char	   *session_prefix; /* NULL when unset */
	int			nranges;
	int64	   *minvals;		/* sequence ranges, inclusive, in the order set */
	int64	   *maxvals;
} ClaimsCell;

extern const ClaimsCell *claims_cells_all(int *n);
extern const ClaimsCell *claims_cell_by_id(int64 cell_id);

/* Kinds of operation one batch entry performs (also passed to SQL). */
typedef enum ClaimsOp
{
	CLAIMS_OP_CREATE = 1,
	CLAIMS_OP_DESTROY = 2,
	CLAIMS_OP_REPLACE = 3
} ClaimsOp;

/* registry.c: the bucket, subject and source type registries */
typedef enum ClaimsRegistryKind
{
	CLAIMS_BUCKET_TYPES = 0,
	CLAIMS_SUBJECT_TYPES,
	CLAIMS_SOURCE_TYPES,
	CLAIMS_REGISTRY_KINDS
} ClaimsRegistryKind;

typedef struct ClaimsTypeEntry
{
	int32		id;
	char	   *name;
	char	   *claim_field;	/* bucket types only; NULL if none */
	bool		integer_valued; /* bucket types only */
	bool		builtin;		/* installed by the extension: part of claims.v1 */
	int			naliases;
	char	  **aliases;
} ClaimsTypeEntry;

extern void claims_registry_invalidate(Oid relid);
extern void claims_registry_pin(void);
extern const ClaimsTypeEntry *claims_type_by_id(ClaimsRegistryKind kind, int32 id);
extern const ClaimsTypeEntry *claims_type_by_name(ClaimsRegistryKind kind, const char *name, int len);
extern const ClaimsTypeEntry *claims_bucket_type_by_field(const char *field, int len);
extern const ClaimsTypeEntry *claims_bucket_type_by_claim_type(const char *tail, int len);
extern const char *claims_registry_kind_label(ClaimsRegistryKind kind);
extern const char *claims_registry_table(ClaimsRegistryKind kind);

/* spi_plans.c: statements prepared once per backend */
typedef enum ClaimsPlanId
{
	CLAIMS_PLAN_BEGIN = 0,
	CLAIMS_PLAN_BEGIN_NEW_LEASE,
	CLAIMS_PLAN_LEASE_LOOKUP,
	CLAIMS_PLAN_CLASSIFY,
	CLAIMS_PLAN_COMMIT_CREATES,
	CLAIMS_PLAN_ROLLBACK_CREATES,
	CLAIMS_PLAN_COMMIT,
	CLAIMS_PLAN_ROLLBACK,
	CLAIMS_PLAN_LIST_LEASES,
	CLAIMS_PLAN_LIST_RECORDS,
	CLAIMS_PLAN_LIST_RECORDS_LTE,
	CLAIMS_PLAN_LIST_RECORDS_GROUP,
	CLAIMS_PLAN_GET_RECORD,
	CLAIMS_PLAN_REGISTRY_BUCKETS,
	CLAIMS_PLAN_REGISTRY_SUBJECTS,
	CLAIMS_PLAN_REGISTRY_SOURCES,
	CLAIMS_PLAN_CELLS,
	CLAIMS_PLAN_CELLS_INFO,
	CLAIMS_NUM_PLANS
} ClaimsPlanId;

/* call_frame.c: the frame of an API call (role, search path, SPI) */

/* The role an API call is judged as, and what to restore at its end. */
typedef struct ClaimsCall
{
	Oid			saved_userid;
	int			saved_sec_context;
	int			guc_nest_level; /* PostgreSQL 17+: the pinned search_path's */
} ClaimsCall;

extern int	claims_call_depth;

extern Oid	claims_caller_role;
extern void claims_spi_begin(FunctionCallInfo fcinfo, ClaimsCall *call);
extern void claims_spi_end(ClaimsCall *call);
extern void claims_call_init(void);
extern Oid	claims_schema_oid(void);

/* spi_plans.c */
extern void claims_plans_init(void);
extern void claims_plans_schema_changed(void);
extern void claims_plans_check_schema(Oid nsp);
extern void claims_plans_xact_end(void);
extern int	claims_execute(ClaimsPlanId id, Datum *args, const char *nulls,
						   bool read_only, long count);
extern int	claims_execute_snapshot(ClaimsPlanId id, Datum *args, const char *nulls,
									Snapshot snapshot, long count);

/* cache.c: what the per-backend caches share */
extern void claims_cache_init(void);
extern MemoryContext claims_cache_new_version(MemoryContext old, const char *name);
extern int	claims_execute_latest(ClaimsPlanId id, bool *fresh);

/* read.c: the routing lookup */
extern void claims_lookup_invalidate(Oid relid);

/* request.c: proto3 JSON input */
typedef struct ClaimsPath
{
	const struct ClaimsPath *parent;
	const char *key;			/* member name, or NULL for an array element */
	int			keylen;
	int			index;
} ClaimsPath;

typedef struct ClaimsMetadata
{
	int32		bucket_type;
	char	   *bucket_value;
	int			bucket_value_len;
	uint8		digest[CLAIMS_DIGEST_LEN];
	bool		has_subject;
	int32		subject_type;
	int64		subject_id;
	bool		has_source;
	int32		source_type;
	bytea	   *source_id;
	Jsonb	   *user_data;		/* NULL when absent */
	int			list_index;		/* position in its request list */
	bool		in_create_list;
} ClaimsMetadata;

typedef struct ClaimsBeginRequest
{
	int64		cell_id;
	bool		has_lease_uuid;
	pg_uuid_t	lease_uuid;
	int			ncreates;
	ClaimsMetadata *creates;
	int			ndestroys;
	ClaimsMetadata *destroys;
} ClaimsBeginRequest;

typedef struct ClaimsBucketRef
{
	int32		bucket_type;
	char	   *value;
	int			value_len;
	uint8		digest[CLAIMS_DIGEST_LEN];
} ClaimsBucketRef;

typedef struct ClaimsListLeasesRequest
{
	int64		cell_id;
	int			limit;
	TimestampTz created_after;
	bool		has_cursor;
	TimestampTz cursor_created_at;
	pg_uuid_t	cursor_uuid;
} ClaimsListLeasesRequest;

typedef struct ClaimsListRecordsRequest
{
	int64		cell_id;
	int32		source_type;
	int			ntypes;
	int32	   *types;			/* bucket_types and claim_types together */
	bytea	   *source_id_gt;	/* empty when unbounded */
	bytea	   *source_id_lte;	/* NULL when unbounded */
	int			limit;
} ClaimsListRecordsRequest;

extern void claims_malformed(const ClaimsPath *path, const char *fmt,...) pg_attribute_printf(2, 3) pg_attribute_noreturn();
extern char *claims_path_string(const ClaimsPath *path);
extern bool claims_key_matches(const char *key, int keylen, const char *snake);
extern void claims_parse_begin(Jsonb *request, ClaimsBeginRequest *out);
extern void claims_parse_get_record(Jsonb *request, ClaimsBucketRef *out);
extern void claims_parse_list_leases(Jsonb *request, ClaimsListLeasesRequest *out);
extern void claims_parse_list_records(Jsonb *request, ClaimsListRecordsRequest *out);
extern void claims_parse_finish(Jsonb *request, int64 *cell_id, pg_uuid_t *lease_uuid);
extern void claims_parse_get_cells(Jsonb *request);
extern void claims_digest(const char *value, int len, uint8 *digest);

/* json_out.c: proto3 JSON output */
typedef struct ClaimsJson
{
	JsonbParseState *state;
	JsonbValue *result;
	int			depth;
	bool		in_array[16];
	bool		proto3;			/* claims.json_output = proto3 when begun */
} ClaimsJson;

extern void claims_json_init(ClaimsJson *js);
extern void claims_json_begin_object(ClaimsJson *js);
extern void claims_json_end_object(ClaimsJson *js);
extern void claims_json_begin_array(ClaimsJson *js);
extern void claims_json_end_array(ClaimsJson *js);
extern void claims_json_key(ClaimsJson *js, const char *key);
extern void claims_json_string(ClaimsJson *js, const char *s, int len);
extern void claims_json_cstring(ClaimsJson *js, const char *s);
extern void claims_json_bool(ClaimsJson *js, bool b);
extern void claims_json_int64_string(ClaimsJson *js, int64 v);
extern void claims_json_number(ClaimsJson *js, int64 v);
extern void claims_json_uuid(ClaimsJson *js, const pg_uuid_t *u);
extern void claims_json_timestamp(ClaimsJson *js, TimestampTz ts);
extern void claims_json_bytes(ClaimsJson *js, const char *data, int len);
extern void claims_json_enum(ClaimsJson *js, ClaimsRegistryKind kind, int32 id);
extern void claims_json_jsonb(ClaimsJson *js, Jsonb *jb);
extern void claims_json_int64_member(ClaimsJson *js, const char *key, int64 v);
extern void claims_json_string_member(ClaimsJson *js, const char *key, const char *s, int len);
extern void claims_json_bool_member(ClaimsJson *js, const char *key, bool b);
extern bool claims_json_list_member(ClaimsJson *js, const char *key, uint64 n);
extern Jsonb *claims_json_finish(ClaimsJson *js);
#define CLAIMS_RECORD_NCOLS 13
extern const AttrNumber claims_record_spi_attnums[CLAIMS_RECORD_NCOLS];
extern int64 claims_json_record(ClaimsJson *js, HeapTuple tuple, TupleDesc desc,
								const AttrNumber *attnums);
extern char *claims_base64_encode(const char *data, int len, int *outlen);
extern char *claims_uuid_string(const pg_uuid_t *u);
extern char *claims_bucket_label(int32 bucket_type, const char *value, int len);
extern const char *claims_bucket_type_subject(int32 bucket_type);

/* reworded.c */
extern void claims_reworded_init(void);

/* cells.c: a cell as CellInfo */
extern void claims_json_cell_info(ClaimsJson *js, int64 cell_id);

/* claims.c: checks shared by the API functions */
extern void claims_check_writable(const char *function);
extern void claims_check_cell_id(int64 cell_id);
extern void claims_repeat_durable(void);

/* stats.c: shared-memory statistics (counts of calls, not of commits) */
typedef enum ClaimsStatCounter
{
	CLAIMS_STAT_BEGIN_UPDATES = 0,
	CLAIMS_STAT_CLAIMS_CREATED,
	CLAIMS_STAT_CLAIMS_DESTROYED,
	CLAIMS_STAT_CLAIMS_REPLACED,
	CLAIMS_STAT_COMMITS,
	CLAIMS_STAT_ROLLBACKS,
	CLAIMS_STAT_REPEATED_COMMITS,
	CLAIMS_STAT_REPEATED_ROLLBACKS,
	CLAIMS_STAT_CONFLICTS_PERMANENT,
	CLAIMS_STAT_CONFLICTS_TEMPORARY,
	CLAIMS_STAT_MALFORMED,
	CLAIMS_STAT_OWNERSHIP,
	CLAIMS_STAT_NOT_FOUND,
	CLAIMS_NUM_STATS
} ClaimsStatCounter;

extern void claims_stats_init(void);
extern void claims_stats_add(ClaimsStatCounter counter, int64 n);
extern void claims_stats_count(ClaimsStatCounter counter);
extern void claims_stats_worker_cycle(bool starting);
extern bool claims_stats_worker_interrupted(void);
extern void claims_stats_worker_report(TimestampTz run, int64 stale_leases, int64 oldest_age);
extern void claims_stats_count_cell(ClaimsStatCounter counter, int64 cell_id);
extern void claims_stats_begin_update_cell(int64 cell_id);
extern void claims_stats_count_begin_cell(int64 cell_id, int ncreates, int ndestroys, int nops);
extern void claims_stats_count_finish_cell(int64 cell_id, bool commit, bool repeated);
/* counters per bucket type: values changed, values at fault by conflict kind */
typedef enum ClaimsTypeStatCounter
{
	CLAIMS_TYPE_STAT_CREATED = 0,
	CLAIMS_TYPE_STAT_DESTROYED,
	CLAIMS_TYPE_STAT_REPLACED,
	CLAIMS_TYPE_STAT_CONFLICTS_PERMANENT,
	CLAIMS_TYPE_STAT_CONFLICTS_TEMPORARY,
	CLAIMS_NUM_TYPE_STATS
} ClaimsTypeStatCounter;

extern void claims_stats_count_type(int32 bucket_type, ClaimsTypeStatCounter counter, int64 n);
extern void claims_stats_worker_report_cells(int ncells, const int64 *cell_ids,
											 const int64 *stale_leases, const int64 *oldest_ages);

/* worker.c: the stale lease reporter and its settings (seconds) */
extern int	claims_stale_lease_threshold;
extern int	claims_report_interval;
extern int	claims_report_repeat;
extern int	claims_lease_history_retention;
extern char *claims_database;
extern void claims_worker_define_gucs(void);
extern void claims_worker_register(void);
extern PGDLLEXPORT void claims_worker_main(Datum main_arg);
extern PGDLLEXPORT void claims_worker_cycle_main(Datum main_arg);

#endif							/* CLAIMS_H */
