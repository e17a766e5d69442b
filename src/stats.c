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

/* One backend's counters, written only by that backend. */
typedef struct ClaimsStatsSlot
{
	pg_atomic_uint64 counters[CLAIMS_NUM_STATS];
} ClaimsStatsSlot;

/* Slots start on their own cache line so owners never share one. */
#define CLAIMS_SLOT_STRIDE	TYPEALIGN(PG_CACHE_LINE_SIZE, sizeof(ClaimsStatsSlot))

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
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Bytes of shared memory the statistics take. */
static Size
claims_stats_memsize(void)
{
	return add_size(CACHELINEALIGN(sizeof(ClaimsStatsShared)),
					mul_size(CLAIMS_SLOT_STRIDE, MaxBackends));
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
 * Count the values of a successful begin_update: a value in both lists is
 * one replace, so the batch has ncreates + ndestroys - nops replaces.
 */
void
claims_stats_count_begin(int ncreates, int ndestroys, int nops)
{
	int			nreplaces = ncreates + ndestroys - nops;

	claims_stats_add(CLAIMS_STAT_CLAIMS_CREATED, ncreates - nreplaces);
	claims_stats_add(CLAIMS_STAT_CLAIMS_DESTROYED, ndestroys - nreplaces);
	claims_stats_add(CLAIMS_STAT_CLAIMS_REPLACED, nreplaces);
}

/* Count a successful commit or rollback, first or repeated. */
void
claims_stats_count_finish(bool commit, bool repeated)
{
	if (commit)
		claims_stats_count(repeated ? CLAIMS_STAT_REPEATED_COMMITS : CLAIMS_STAT_COMMITS);
	else
		claims_stats_count(repeated ? CLAIMS_STAT_REPEATED_ROLLBACKS : CLAIMS_STAT_ROLLBACKS);
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
