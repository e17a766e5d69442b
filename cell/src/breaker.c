/*-------------------------------------------------------------------------
 *
 * breaker.c
 *	  Circuit breaker and statistics of the calls to the claims store.
 *
 * One slot per database in shared memory when the library is preloaded:
 * it counts calls in flight (at most claims_cell.max_concurrent_calls),
 * opens after claims_cell.breaker_threshold consecutive failures, fails
 * calls at once for claims_cell.breaker_cooldown, then lets one call probe
 * the store; while it is open one call every
 * claims_cell.breaker_probe_interval probes early, so that a breaker
 * opened by a failover closes as soon as the store accepts writes again.
 * The slot also counts the failures of each store host (the node a
 * connection failed on): every backend drops its connection to a host
 * whose count moved since it connected, so no backend pays a failed call
 * of its own after a failover. And it names the host that last accepted a
 * session, where the next connection starts. Without preloading each
 * backend keeps its own slot, which limits nothing across backends; a LOG
 * line says so once per backend.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#define CELL_BREAKER_SLOTS	64
#define CELL_BREAKER_HOSTS	8

typedef struct CellBreakerSlot
{
	Oid			dbid;
	int			in_flight;
	int			consecutive_failures;
	bool		probing;
	TimestampTz open_until;		/* 0: closed */
	TimestampTz next_probe;		/* an early probe may start from then */
	uint32		host_keys[CELL_BREAKER_HOSTS];	/* 0: unused */
	uint32		host_failures[CELL_BREAKER_HOSTS];
	uint32		good_host;		/* key of the host that last accepted; 0: none */
	uint64		counters[CELL_STAT_COUNT];
	double		latency_sum_ms;
	uint64		latency_n;
	double		latency_max_ms;
	TimestampTz last_reconcile;
	TimestampTz last_verify;
} CellBreakerSlot;

typedef struct CellBreakerShared
{
	slock_t		mutex;
	CellBreakerSlot slots[CELL_BREAKER_SLOTS];
} CellBreakerShared;

static CellBreakerShared *cell_shared = NULL;
static CellBreakerSlot cell_local_slot;
static bool cell_local_noted = false;

/* What this backend holds in its database's slot, released at exit. */
static int	cell_my_in_flight = 0;
static bool cell_my_probe = false;
static bool cell_exit_registered = false;

/* Request the shared memory of the breaker. */
void
cell_breaker_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(CellBreakerShared)));
}

/* Create or attach the shared breaker. */
void
cell_breaker_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	cell_shared = ShmemInitStruct("claims_cell breaker", sizeof(CellBreakerShared), &found);
	if (!found)
	{
		memset(cell_shared, 0, sizeof(CellBreakerShared));
		SpinLockInit(&cell_shared->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Whether the breaker lives in shared memory. */
bool
cell_breaker_is_shared(void)
{
	return cell_shared != NULL;
}

/*
 * Whether a slot holds state its database's calls depend on: calls in
 * flight, a probe, an open or half-open breaker, failures counting towards
 * opening it. Such a slot is never given to another database.
 */
static bool
cell_slot_in_use(CellBreakerSlot *s)
{
	return s->in_flight > 0 || s->probing || s->open_until != 0 || s->consecutive_failures > 0;
}

/*
 * This database's slot, or NULL when it has none (the caller holds the
 * mutex when shared); without preloading, the backend's own slot.
 */
static CellBreakerSlot *
cell_slot_find(void)
{
	if (cell_shared == NULL)
	{
		if (!cell_local_noted)
		{
			cell_local_noted = true;
			ereport(LOG,
					(errmsg("claims_cell: not loaded through shared_preload_libraries; the circuit breaker and statistics are per backend")));
		}
		return &cell_local_slot;
	}
	for (int i = 0; i < CELL_BREAKER_SLOTS; i++)
	{
		if (cell_shared->slots[i].dbid == MyDatabaseId)
			return &cell_shared->slots[i];
	}
	return NULL;
}

/*
 * This database's slot, taken when it has none (the caller holds the mutex
 * when shared): an unused one, else one whose database's calls depend on
 * nothing in it (its statistics start again). Only calls take slots, never
 * a read of the statistics. A full table counts alone rather than corrupt.
 */
static CellBreakerSlot *
cell_slot(void)
{
	CellBreakerSlot *unused = NULL;
	CellBreakerSlot *idle = NULL;
	CellBreakerSlot *s = cell_slot_find();

	if (s != NULL)
		return s;
	for (int i = 0; i < CELL_BREAKER_SLOTS; i++)
	{
		s = &cell_shared->slots[i];
		if (s->dbid == InvalidOid)
		{
			if (unused == NULL)
				unused = s;
		}
		else if (idle == NULL && !cell_slot_in_use(s))
			idle = s;
	}
	s = unused ? unused : idle;
	if (s == NULL)
		return &cell_local_slot;
	memset(s, 0, sizeof(CellBreakerSlot));
	s->dbid = MyDatabaseId;
	return s;
}

/* Take the shared mutex (no-op without preloading). */
static void
cell_lock(void)
{
	if (cell_shared)
		SpinLockAcquire(&cell_shared->mutex);
}

/* Release the shared mutex. */
static void
cell_unlock(void)
{
	if (cell_shared)
		SpinLockRelease(&cell_shared->mutex);
}

/*
 * Exit callback: a backend that leaves in the middle of a call (FATAL,
 * pg_terminate_backend, a lost client during a call) gives its places in
 * the slot back, or they would count against max_concurrent_calls until
 * the server restarts.
 */
static void
cell_breaker_at_exit(int code, Datum arg)
{
	CellBreakerSlot *s;

	if (cell_shared == NULL || (cell_my_in_flight == 0 && !cell_my_probe))
		return;
	cell_lock();
	s = cell_slot();
	s->in_flight = Max(s->in_flight - cell_my_in_flight, 0);
	if (cell_my_probe)
		s->probing = false;
	cell_unlock();
	cell_my_in_flight = 0;
	cell_my_probe = false;
}

/*
 * Admit one call: CELL_CALL_OK (counted in flight; *probe says whether it
 * is the probe of an open breaker), CELL_CALL_BREAKER_OPEN or CELL_CALL_BUSY.
 * A call finishing a lease already taken is always admitted (and never the
 * probe): refusing it would not relieve the store, only leave the lease
 * outstanding until recovery.
 */
CellCallStatus
cell_breaker_enter(bool *probe, bool finishing)
{
	CellBreakerSlot *s;
	CellCallStatus st = CELL_CALL_OK;
	TimestampTz now = GetCurrentTimestamp();

	*probe = false;
	if (cell_shared != NULL && !cell_exit_registered)
	{
		before_shmem_exit(cell_breaker_at_exit, (Datum) 0);
		cell_exit_registered = true;
	}
	cell_lock();
	s = cell_slot();
	if (finishing)
	{
		/* admitted whatever the breaker and the cap say */
	}
	else if (s->open_until != 0)
	{
		if (s->probing ||
			(now < s->open_until &&
			 (cell_breaker_probe_interval_ms == 0 || now < s->next_probe)))
			st = CELL_CALL_BREAKER_OPEN;
		else
		{
			s->probing = true;
			*probe = true;
		}
	}
	if (st == CELL_CALL_OK && !finishing && s->in_flight >= cell_max_concurrent_calls)
	{
		st = CELL_CALL_BUSY;
		if (*probe)
			s->probing = false;
		*probe = false;
	}
	if (st == CELL_CALL_OK)
	{
		s->in_flight++;
		cell_my_in_flight++;
		cell_my_probe = *probe;
	}
	else
		s->counters[CELL_STAT_BREAKER_REJECTIONS]++;
	cell_unlock();
	return st;
}

/*
 * End an admitted call: outcome 1 reached the store (whatever it answered)
 * and closes the breaker, 0 failed and counts towards opening it (a failed
 * probe opens it again at once), -1 was cancelled here and counts nothing.
 * A call that finishes a lease ends with 2 when it reached the store (its
 * latency counts) and -1 otherwise: admitted past the breaker, it does
 * not steer it either.
 */
void
cell_breaker_leave(int outcome, bool probe, double elapsed_ms)
{
	bool		reachable = outcome == 1;

	CellBreakerSlot *s;
	bool		opened = false;
	bool		closed = false;

	cell_lock();
	s = cell_slot();
	if (s->in_flight > 0)
		s->in_flight--;
	if (cell_my_in_flight > 0)
		cell_my_in_flight--;
	if (probe)
	{
		s->probing = false;
		cell_my_probe = false;
	}
	if (outcome < 0)
	{
		/* cancelled by the caller: says nothing about the store */
	}
	else if (reachable || outcome == 2)
	{
		if (reachable)
		{
			closed = s->open_until != 0;
			s->consecutive_failures = 0;
			s->open_until = 0;
		}
		s->latency_sum_ms += elapsed_ms;
		s->latency_n++;
		if (elapsed_ms > s->latency_max_ms)
			s->latency_max_ms = elapsed_ms;
	}
	else
	{
		s->consecutive_failures++;
		if (probe || (s->open_until == 0 && s->consecutive_failures >= cell_breaker_threshold))
		{
			TimestampTz now = GetCurrentTimestamp();

			opened = s->open_until == 0;
			s->open_until = TimestampTzPlusMilliseconds(now, cell_breaker_cooldown_ms);
			s->next_probe = TimestampTzPlusMilliseconds(now, cell_breaker_probe_interval_ms);
		}
	}
	cell_unlock();

	if (opened)
		ereport(LOG,
				(errmsg("claims_cell: circuit breaker opened after %d failed calls to the claims store; calls fail at once for %d ms",
						cell_breaker_threshold, cell_breaker_cooldown_ms),
				 cell_breaker_probe_interval_ms > 0
				 ? errdetail("One call every %d ms probes the store meanwhile.",
							 cell_breaker_probe_interval_ms) : 0));
	if (closed)
		ereport(LOG, (errmsg("claims_cell: circuit breaker closed: the claims store answered again")));
}

/*
 * The place of a store host in the slot's failure counts (the caller holds
 * the mutex); when all are taken, a host shares the place its key hashes
 * to, which can only drop connections too often, never too seldom.
 */
static int
cell_host_index(CellBreakerSlot *s, uint32 key)
{
	for (int i = 0; i < CELL_BREAKER_HOSTS; i++)
	{
		if (s->host_keys[i] == key)
			return i;
		if (s->host_keys[i] == 0)
		{
			s->host_keys[i] = key;
			s->host_failures[i] = 0;
			return i;
		}
	}
	return key % CELL_BREAKER_HOSTS;
}

/* How many connection failures the host has had in this database. */
uint32
cell_host_failures(uint32 key)
{
	CellBreakerSlot *s;
	uint32		n;

	cell_lock();
	s = cell_slot();
	n = s->host_failures[cell_host_index(s, key)];
	cell_unlock();
	return n;
}

/*
 * A connection to the host failed (lost, refused, read-only, or too slow to
 * open while other hosts remained): every backend's connection to it is
 * dropped before its next call.
 */
void
cell_host_failed(uint32 key)
{
	CellBreakerSlot *s;

	cell_lock();
	s = cell_slot();
	s->host_failures[cell_host_index(s, key)]++;
	if (s->good_host == key)
		s->good_host = 0;
	cell_unlock();
}

/* The host accepted a session: the next connections start there. */
void
cell_host_accepted(uint32 key)
{
	CellBreakerSlot *s;

	cell_lock();
	s = cell_slot();
	s->good_host = key;
	cell_unlock();
}

/* The key of the host that last accepted a session, 0 when none. */
uint32
cell_host_preferred(void)
{
	CellBreakerSlot *s;
	uint32		key;

	cell_lock();
	s = cell_slot();
	key = s->good_host;
	cell_unlock();
	return key;
}

/* Count one event. */
void
cell_stats_count(CellStat stat)
{
	CellBreakerSlot *s;

	cell_lock();
	s = cell_slot();
	s->counters[stat]++;
	cell_unlock();
}

/* Count one reconcile() pass of the background worker. */
void
cell_stats_reconcile(int64 committed, int64 rolled_back, int64 orphans_deleted, int64 pending)
{
	CellBreakerSlot *s;

	cell_lock();
	s = cell_slot();
	s->counters[CELL_STAT_RECONCILE_PASSES]++;
	s->counters[CELL_STAT_RECONCILE_COMMITTED] += committed;
	s->counters[CELL_STAT_RECONCILE_ROLLED_BACK] += rolled_back;
	s->counters[CELL_STAT_RECONCILE_ORPHANS] += orphans_deleted;
	s->last_reconcile = GetCurrentTimestamp();
	cell_unlock();
}

/* Count one finished verification run of the background worker. */
void
cell_stats_verify(int64 missing, int64 extra, int64 drifted, int64 repaired)
{
	CellBreakerSlot *s;

	cell_lock();
	s = cell_slot();
	s->counters[CELL_STAT_VERIFY_RUNS]++;
	s->last_verify = GetCurrentTimestamp();
	s->counters[CELL_STAT_VERIFY_MISSING] += missing;
	s->counters[CELL_STAT_VERIFY_EXTRA] += extra;
	s->counters[CELL_STAT_VERIFY_DRIFTED] += drifted;
	s->counters[CELL_STAT_VERIFY_REPAIRED] += repaired;
	cell_unlock();
}

/* Copy this database's counters and breaker state. */
void
cell_stats_read(CellStatsSnapshot *snap)
{
	CellBreakerSlot *s;
	TimestampTz now = GetCurrentTimestamp();

	cell_lock();
	s = cell_slot_find();
	if (s == NULL)
	{
		/* no call of this database has taken a slot: nothing to report */
		static const CellBreakerSlot empty;

		s = (CellBreakerSlot *) &empty;
	}
	snap->shared = cell_shared != NULL;
	memcpy(snap->counters, s->counters, sizeof(snap->counters));
	if (s->open_until == 0)
		snap->breaker_state = "closed";
	else if (!s->probing && now < s->open_until &&
			 (cell_breaker_probe_interval_ms == 0 || now < s->next_probe))
		snap->breaker_state = "open";
	else
		snap->breaker_state = "half-open";
	snap->in_flight = s->in_flight;
	snap->latency_sum_ms = s->latency_sum_ms;
	snap->latency_n = s->latency_n;
	snap->latency_max_ms = s->latency_max_ms;
	snap->last_reconcile = s->last_reconcile;
	snap->last_verify = s->last_verify;
	cell_unlock();
}
