/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  Shared-memory statistics of the API and of the stale lease reporter.
 *
 * Every backend owns one slot of counters in shared memory (indexed by its
 * backend id) and is the only process that writes it, so counting never
 * makes backends wait for each other: an increment is a plain load and
 * store. claims_stats() sums the slots. A reset does not touch the slots:
 * it records the current sums as a baseline that later reads subtract, under
 * an LWLock that only readers and resets take.
 *
 * Counts are calls, not committed transactions: a begin_update or commit is
 * counted when the function has done its work, before the caller's
 * transaction commits, and errors are counted before they are raised.
 *
 * The same counters are also kept per cell, in a fixed table of
 * CLAIMS_STATS_CELLS entries found by open addressing on the cell id; an
 * entry is claimed with a compare-and-swap of its cell id and never freed,
 * so finding one takes no lock, and its counters are atomic additions
 * (backends of one cell share them). Calls for cells beyond the table's
 * capacity are counted in the totals only. The stale lease reporter also
 * publishes per cell what its last run found. Values changed and values at
 * fault in conflicts are also counted per bucket type, in a table indexed
 * by the type id (1 to CLAIMS_STATS_TYPES - 1; other ids are not counted
 * per type).
 *
 * Without shared_preload_libraries there is no shared memory: counting is a
 * no-op and claims_stats() fails with a hint.
 *
 *-------------------------------------------------------------------------
 */
#include "claims.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#else
#include "storage/backendid.h"
#endif
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/builtins.h"

PG_FUNCTION_INFO_V1(claims_stats);
PG_FUNCTION_INFO_V1(claims_stats_reset);
PG_FUNCTION_INFO_V1(claims_stats_by_cell);

/* Cells whose calls are counted one by one. */
#define CLAIMS_STATS_CELLS	1024
/* Bucket type ids below this are counted one by one. */
#define CLAIMS_STATS_TYPES	256

PG_FUNCTION_INFO_V1(claims_stats_by_bucket_type);

/* One backend's counters, written only by that backend. */
typedef struct ClaimsStatsSlot
{
	pg_atomic_uint64 counters[CLAIMS_NUM_STATS];
} ClaimsStatsSlot;

/* Slots start on their own cache line so owners never share one. */
#define CLAIMS_SLOT_STRIDE	TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(ClaimsStatsSlot))

/*
 * One cell's counters. cell_id is 0 while the entry is free; the counters
 * are added to atomically; the rest is under the lock.
 */
typedef struct ClaimsCellStats
{
	pg_atomic_uint64 cell_id;
	pg_atomic_uint64 counters[CLAIMS_NUM_STATS];
	uint64		baseline[CLAIMS_NUM_STATS]; /* sums at the last reset */
	int64		stale_leases;	/* the reporter's last run */
	int64		oldest_stale_age;	/* microseconds; -1 when none */
} ClaimsCellStats;

#define CLAIMS_CELL_STRIDE	TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(ClaimsCellStats))

/* One bucket type's counters: added to atomically, baselines under the lock. */
typedef struct ClaimsTypeStats
{
	pg_atomic_uint64 counters[CLAIMS_NUM_TYPE_STATS];
	uint64		baseline[CLAIMS_NUM_TYPE_STATS];
} ClaimsTypeStats;

#define CLAIMS_TYPE_STRIDE	TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(ClaimsTypeStats))

typedef struct ClaimsStatsShared
{
	LWLock	   *lock;			/* readers (shared) against resets */
	TimestampTz stats_reset;
	uint64		baseline[CLAIMS_NUM_STATS]; /* sums at the last reset */
	slock_t		mutex;			/* protects the worker fields */
	TimestampTz worker_last_run;	/* 0 before the first run */
	int64		stale_leases;
	int64		oldest_stale_age;	/* microseconds; -1 when none */
	bool		worker_in_cycle;	/* a cycle started and did not end */
	int			nslots;
} ClaimsStatsShared;

static ClaimsStatsShared *claims_shared = NULL;
static char *claims_slots = NULL;
static char *claims_cells = NULL;
static char *claims_types = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Bytes of shared memory the statistics take. */
static Size
claims_stats_memsize(void)
{
	Size		size = CACHELINEALIGN(sizeof(ClaimsStatsShared));

	size = add_size(size, mul_size(CLAIMS_SLOT_STRIDE, MaxBackends));
	size = add_size(size, mul_size(CLAIMS_CELL_STRIDE, CLAIMS_STATS_CELLS));
	return add_size(size, mul_size(CLAIMS_TYPE_STRIDE, CLAIMS_STATS_TYPES));
}

/* The i-th entry of the per-cell table. */
static ClaimsCellStats *
claims_cell_entry(int i)
{
	return (ClaimsCellStats *) (claims_cells + i * CLAIMS_CELL_STRIDE);
}

/* The counters of bucket type id i. */
static ClaimsTypeStats *
claims_type_entry(int i)
{
	return (ClaimsTypeStats *) (claims_types + i * CLAIMS_TYPE_STRIDE);
}

/* Ask for the shared memory and the lock (postmaster, PG15 hook). */
static void
claims_stats_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(claims_stats_memsize());
	RequestNamedLWLockTranche("claims", 1);
}

/* Create or attach to the shared statistics. */
static void
claims_stats_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	claims_shared = ShmemInitStruct("claims statistics", claims_stats_memsize(), &found);
	claims_slots = (char *) claims_shared + CACHELINEALIGN(sizeof(ClaimsStatsShared));
	claims_cells = claims_slots + CLAIMS_SLOT_STRIDE * MaxBackends;
	claims_types = claims_cells + CLAIMS_CELL_STRIDE * CLAIMS_STATS_CELLS;
	if (!found)
	{
		memset(claims_shared, 0, sizeof(ClaimsStatsShared));
		claims_shared->lock = &(GetNamedLWLockTranche("claims"))->lock;
		claims_shared->stats_reset = GetCurrentTimestamp();
		SpinLockInit(&claims_shared->mutex);
		claims_shared->oldest_stale_age = -1;
		claims_shared->nslots = MaxBackends;
		for (int i = 0; i < MaxBackends; i++)
		{
			ClaimsStatsSlot *slot = (ClaimsStatsSlot *) (claims_slots + i * CLAIMS_SLOT_STRIDE);

			for (int c = 0; c < CLAIMS_NUM_STATS; c++)
				pg_atomic_init_u64(&slot->counters[c], 0);
		}
		for (int i = 0; i < CLAIMS_STATS_CELLS; i++)
		{
			ClaimsCellStats *e = claims_cell_entry(i);

			memset(e, 0, sizeof(ClaimsCellStats));
			pg_atomic_init_u64(&e->cell_id, 0);
			for (int c = 0; c < CLAIMS_NUM_STATS; c++)
				pg_atomic_init_u64(&e->counters[c], 0);
			e->oldest_stale_age = -1;
		}
		for (int i = 0; i < CLAIMS_STATS_TYPES; i++)
		{
			ClaimsTypeStats *t = claims_type_entry(i);

			memset(t, 0, sizeof(ClaimsTypeStats));
			for (int c = 0; c < CLAIMS_NUM_TYPE_STATS; c++)
				pg_atomic_init_u64(&t->counters[c], 0);
		}
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Install the shared-memory hooks; called from _PG_init only while
 * shared_preload_libraries is being processed.
 */
void
claims_stats_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = claims_stats_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = claims_stats_shmem_startup;
}

/* This backend's counters, or NULL when there is no shared memory. */
static pg_atomic_uint64 *
claims_stats_my_counters(void)
{
	/*
	 * One slot per regular backend: BackendId 1..MaxBackends up to
	 * PostgreSQL 16, ProcNumber 0..MaxBackends-1 from 17 (auxiliary
	 * processes have higher numbers and no slot).
	 */
#if PG_VERSION_NUM >= 170000
	int			slot = MyProcNumber;
#else
	int			slot = MyBackendId - 1;
#endif

	if (claims_shared == NULL || slot < 0 || slot >= claims_shared->nslots)
		return NULL;
	return ((ClaimsStatsSlot *) (claims_slots + slot * CLAIMS_SLOT_STRIDE))->counters;
}

/*
 * Add n to one of this backend's counters. Only the owner writes a slot, so
 * no atomic read-modify-write is needed.
 */
void
claims_stats_add(ClaimsStatCounter counter, int64 n)
{
	pg_atomic_uint64 *c = claims_stats_my_counters();

	if (c == NULL || n <= 0)
		return;
	pg_atomic_write_u64(&c[counter], pg_atomic_read_u64(&c[counter]) + (uint64) n);
}

/* Count one event. */
void
claims_stats_count(ClaimsStatCounter counter)
{
	claims_stats_add(counter, 1);
}

/*
 * The entry of a cell, claimed when the cell has none yet; NULL when the
 * table is full or there is no shared memory. Entries are never freed, so a
 * cell id once seen in an entry stays there.
 */
static ClaimsCellStats *
claims_cell_find(int64 cell_id)
{
	uint64		h;

	if (claims_shared == NULL || cell_id <= 0)
		return NULL;
	h = (uint64) cell_id * UINT64CONST(0x9E3779B97F4A7C15);
	for (int i = 0; i < CLAIMS_STATS_CELLS; i++)
	{
		ClaimsCellStats *e = claims_cell_entry((int) ((h + i) % CLAIMS_STATS_CELLS));
		uint64		id = pg_atomic_read_u64(&e->cell_id);

		if (id == (uint64) cell_id)
			return e;
		if (id == 0)
		{
			uint64		expected = 0;

			if (pg_atomic_compare_exchange_u64(&e->cell_id, &expected, (uint64) cell_id) ||
				expected == (uint64) cell_id)
				return e;
		}
	}
	return NULL;
}

/* Add n to a counter of one cell, and of the totals when asked. */
static void
claims_stats_add_cell(ClaimsStatCounter counter, int64 cell_id, int64 n, bool total)
{
	ClaimsCellStats *e;

	if (claims_shared == NULL || n <= 0)
		return;
	if (total)
		claims_stats_add(counter, n);
	e = claims_cell_find(cell_id);
	if (e != NULL)
		pg_atomic_fetch_add_u64(&e->counters[counter], (uint64) n);
}

/* Count one event of a known cell, in the totals and for the cell. */
void
claims_stats_count_cell(ClaimsStatCounter counter, int64 cell_id)
{
	claims_stats_add_cell(counter, cell_id, 1, true);
}

/*
 * Count a begin_update for its cell once its request named one; the total
 * counted it on entry, whatever the request held.
 */
void
claims_stats_begin_update_cell(int64 cell_id)
{
	claims_stats_add_cell(CLAIMS_STAT_BEGIN_UPDATES, cell_id, 1, false);
}

/*
 * Count the values of a successful begin_update, in the totals and for its
 * cell: a value in both lists is one replace, so the batch has
 * ncreates + ndestroys - nops replaces.
 */
void
claims_stats_count_begin_cell(int64 cell_id, int ncreates, int ndestroys, int nops)
{
	int			nreplaces = ncreates + ndestroys - nops;

	claims_stats_add_cell(CLAIMS_STAT_CLAIMS_CREATED, cell_id, ncreates - nreplaces, true);
	claims_stats_add_cell(CLAIMS_STAT_CLAIMS_DESTROYED, cell_id, ndestroys - nreplaces, true);
	claims_stats_add_cell(CLAIMS_STAT_CLAIMS_REPLACED, cell_id, nreplaces, true);
}

/* Add n to a counter of one bucket type (ids beyond the table: nothing). */
void
claims_stats_count_type(int32 bucket_type, ClaimsTypeStatCounter counter, int64 n)
{
	if (claims_shared == NULL || n <= 0 || bucket_type <= 0 || bucket_type >= CLAIMS_STATS_TYPES)
		return;
	pg_atomic_fetch_add_u64(&claims_type_entry(bucket_type)->counters[counter], (uint64) n);
}

/* Count a successful commit or rollback, first or repeated. */
void
claims_stats_count_finish_cell(int64 cell_id, bool commit, bool repeated)
{
	if (commit)
		claims_stats_count_cell(repeated ? CLAIMS_STAT_REPEATED_COMMITS : CLAIMS_STAT_COMMITS, cell_id);
	else
		claims_stats_count_cell(repeated ? CLAIMS_STAT_REPEATED_ROLLBACKS : CLAIMS_STAT_ROLLBACKS, cell_id);
}

/* Sum every slot. The caller holds the lock. */
static void
claims_stats_sum(uint64 *sums)
{
	memset(sums, 0, sizeof(uint64) * CLAIMS_NUM_STATS);
	for (int i = 0; i < claims_shared->nslots; i++)
	{
		ClaimsStatsSlot *slot = (ClaimsStatsSlot *) (claims_slots + i * CLAIMS_SLOT_STRIDE);

		for (int c = 0; c < CLAIMS_NUM_STATS; c++)
			sums[c] += pg_atomic_read_u64(&slot->counters[c]);
	}
}

/* Fail unless the library was preloaded. */
static void
claims_stats_check_available(void)
{
	if (claims_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("claims statistics are not available"),
				 errdetail("The claims library was not loaded at server start."),
				 errhint("Add claims to shared_preload_libraries and restart the server.")));
}

/*
 * claims_stats() returns record: the counters since the last reset and the
 * stale lease reporter's latest findings.
 */
Datum
claims_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	Datum		values[CLAIMS_NUM_STATS + 4];
	bool		nulls[CLAIMS_NUM_STATS + 4];
	uint64		sums[CLAIMS_NUM_STATS];
	TimestampTz reset;
	TimestampTz last_run;
	int64		stale;
	int64		oldest;
	int			k = CLAIMS_NUM_STATS;

	claims_stats_check_available();
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "claims: return type must be a row type");
	if (tupdesc->natts != CLAIMS_NUM_STATS + 4)
		elog(ERROR, "claims: claims_stats() has %d columns, expected %d",
			 tupdesc->natts, CLAIMS_NUM_STATS + 4);

	LWLockAcquire(claims_shared->lock, LW_SHARED);
	claims_stats_sum(sums);
	for (int c = 0; c < CLAIMS_NUM_STATS; c++)
		sums[c] = sums[c] > claims_shared->baseline[c] ? sums[c] - claims_shared->baseline[c] : 0;
	reset = claims_shared->stats_reset;
	LWLockRelease(claims_shared->lock);

	SpinLockAcquire(&claims_shared->mutex);
	last_run = claims_shared->worker_last_run;
	stale = claims_shared->stale_leases;
	oldest = claims_shared->oldest_stale_age;
	SpinLockRelease(&claims_shared->mutex);

	memset(nulls, 0, sizeof(nulls));
	for (int c = 0; c < CLAIMS_NUM_STATS; c++)
		values[c] = Int64GetDatum((int64) sums[c]);

	if (last_run == 0)
	{
		nulls[k] = nulls[k + 1] = nulls[k + 2] = true;
	}
	else
	{
		values[k] = TimestampTzGetDatum(last_run);
		values[k + 1] = Int64GetDatum(stale);
		if (oldest < 0)
			nulls[k + 2] = true;
		else
		{
			Interval   *age = palloc0(sizeof(Interval));

			age->day = (int32) (oldest / USECS_PER_DAY);
			age->time = oldest % USECS_PER_DAY;
			values[k + 2] = IntervalPGetDatum(age);
		}
	}
	values[k + 3] = TimestampTzGetDatum(reset);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * claims_stats_reset() returns void: start counting from zero.
 */
Datum
claims_stats_reset(PG_FUNCTION_ARGS)
{
	uint64		sums[CLAIMS_NUM_STATS];

	claims_stats_check_available();
	LWLockAcquire(claims_shared->lock, LW_EXCLUSIVE);
	claims_stats_sum(sums);
	memcpy(claims_shared->baseline, sums, sizeof(sums));
	for (int i = 0; i < CLAIMS_STATS_CELLS; i++)
	{
		ClaimsCellStats *e = claims_cell_entry(i);

		for (int c = 0; c < CLAIMS_NUM_STATS; c++)
			e->baseline[c] = pg_atomic_read_u64(&e->counters[c]);
	}
	for (int i = 0; i < CLAIMS_STATS_TYPES; i++)
	{
		ClaimsTypeStats *t = claims_type_entry(i);

		for (int c = 0; c < CLAIMS_NUM_TYPE_STATS; c++)
			t->baseline[c] = pg_atomic_read_u64(&t->counters[c]);
	}
	claims_shared->stats_reset = GetCurrentTimestamp();
	LWLockRelease(claims_shared->lock);
	PG_RETURN_VOID();
}

/*
 * Note that a cycle of the reporter starts (starting = true) or ends; a
 * flag still set when its worker has exited, or when a new launcher starts,
 * means that a cycle died.
 */
void
claims_stats_worker_cycle(bool starting)
{
	if (claims_shared == NULL)
		return;
	SpinLockAcquire(&claims_shared->mutex);
	claims_shared->worker_in_cycle = starting;
	SpinLockRelease(&claims_shared->mutex);
}

/* Whether a worker died in the middle of a cycle. */
bool
claims_stats_worker_interrupted(void)
{
	bool		interrupted;

	if (claims_shared == NULL)
		return false;
	SpinLockAcquire(&claims_shared->mutex);
	interrupted = claims_shared->worker_in_cycle;
	SpinLockRelease(&claims_shared->mutex);
	return interrupted;
}

/*
 * Record what the reporter found: the run time, the number of stale leases
 * and the age of the oldest (-1 when none).
 */
void
claims_stats_worker_report(TimestampTz run, int64 stale_leases, int64 oldest_age)
{
	if (claims_shared == NULL)
		return;
	SpinLockAcquire(&claims_shared->mutex);
	claims_shared->worker_last_run = run;
	claims_shared->stale_leases = stale_leases;
	claims_shared->oldest_stale_age = oldest_age;
	SpinLockRelease(&claims_shared->mutex);
}

/*
 * Publish per cell what a run of the reporter found: cells not named have
 * no stale leases. Under the lock, so that a reader sees one run's numbers.
 */
void
claims_stats_worker_report_cells(int ncells, const int64 *cell_ids,
								 const int64 *stale_leases, const int64 *oldest_ages)
{
	if (claims_shared == NULL)
		return;
	LWLockAcquire(claims_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < CLAIMS_STATS_CELLS; i++)
	{
		ClaimsCellStats *e = claims_cell_entry(i);

		e->stale_leases = 0;
		e->oldest_stale_age = -1;
	}
	for (int i = 0; i < ncells; i++)
	{
		ClaimsCellStats *e = claims_cell_find(cell_ids[i]);

		if (e == NULL)
			continue;
		e->stale_leases = stale_leases[i];
		e->oldest_stale_age = oldest_ages[i];
	}
	LWLockRelease(claims_shared->lock);
}

/* An interval of the given microseconds. */
static Datum
claims_usecs_interval(int64 usecs)
{
	Interval   *age = palloc0(sizeof(Interval));

	age->day = (int32) (usecs / USECS_PER_DAY);
	age->time = usecs % USECS_PER_DAY;
	return IntervalPGetDatum(age);
}

/*
 * claims_stats_by_cell() returns setof record: one row per cell the server
 * counted since it started (the counters since the last reset) and what the
 * reporter's last run found for it.
 */
Datum
claims_stats_by_cell(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[CLAIMS_NUM_STATS + 3];
	bool		nulls[CLAIMS_NUM_STATS + 3];

	claims_stats_check_available();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != CLAIMS_NUM_STATS + 3)
		elog(ERROR, "claims: claims_stats_by_cell() has %d columns, expected %d",
			 rsinfo->setDesc->natts, CLAIMS_NUM_STATS + 3);

	LWLockAcquire(claims_shared->lock, LW_SHARED);
	for (int i = 0; i < CLAIMS_STATS_CELLS; i++)
	{
		ClaimsCellStats *e = claims_cell_entry(i);
		uint64		id = pg_atomic_read_u64(&e->cell_id);

		if (id == 0)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int64GetDatum((int64) id);
		for (int c = 0; c < CLAIMS_NUM_STATS; c++)
		{
			uint64		v = pg_atomic_read_u64(&e->counters[c]);

			values[c + 1] = Int64GetDatum((int64) (v > e->baseline[c] ? v - e->baseline[c] : 0));
		}
		values[CLAIMS_NUM_STATS + 1] = Int64GetDatum(e->stale_leases);
		if (e->oldest_stale_age < 0)
			nulls[CLAIMS_NUM_STATS + 2] = true;
		else
			values[CLAIMS_NUM_STATS + 2] = claims_usecs_interval(e->oldest_stale_age);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(claims_shared->lock);
	return (Datum) 0;
}

/*
 * claims_stats_by_bucket_type() returns setof record: one row per bucket
 * type id with anything counted since the server started, its counters
 * since the last reset.
 */
Datum
claims_stats_by_bucket_type(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		values[CLAIMS_NUM_TYPE_STATS + 1];
	bool		nulls[CLAIMS_NUM_TYPE_STATS + 1] = {0};

	claims_stats_check_available();
	InitMaterializedSRF(fcinfo, 0);
	if (rsinfo->setDesc->natts != CLAIMS_NUM_TYPE_STATS + 1)
		elog(ERROR, "claims: claims_stats_by_bucket_type() has %d columns, expected %d",
			 rsinfo->setDesc->natts, CLAIMS_NUM_TYPE_STATS + 1);

	LWLockAcquire(claims_shared->lock, LW_SHARED);
	for (int i = 1; i < CLAIMS_STATS_TYPES; i++)
	{
		ClaimsTypeStats *t = claims_type_entry(i);
		bool		seen = false;

		values[0] = Int32GetDatum(i);
		for (int c = 0; c < CLAIMS_NUM_TYPE_STATS; c++)
		{
			uint64		v = pg_atomic_read_u64(&t->counters[c]);

			seen |= v > 0;
			values[c + 1] = Int64GetDatum((int64) (v > t->baseline[c] ? v - t->baseline[c] : 0));
		}
		if (seen)
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(claims_shared->lock);
	return (Datum) 0;
}
