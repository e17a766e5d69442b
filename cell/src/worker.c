/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The cell's background worker: runs claims_cell.reconcile() every
 *	  claims_cell.reconcile_interval and at once when the store's
 *	  NOTIFY claims_stale_leases names this cell, and finishes the leases
 *	  that committing and aborting backends hand it.
 *
 * The shape is the store's (src/worker.c), for the same reason: nothing may
 * hold the database between cycles, or DROP DATABASE would wait for it. A
 * launcher, registered when the library is preloaded, connects to no
 * database. It keeps the LISTEN connection to the store and a queue in
 * shared memory; whenever a pass is due, a notification names the cell or
 * the queue holds work, it starts a cycle worker (a dynamic background
 * worker) in claims_cell.database and waits for it. The cycle drains the
 * queue, runs reconcile() when asked, keeps draining while work keeps
 * coming and exits after CELL_CYCLE_LINGER_MS without any, at once when
 * a command waits to have the database alone, and in any case when the
 * next pass is due or it has run for CELL_CYCLE_MAX_LIFE_MS: under steady
 * commits the launcher still gets its turn to start passes, to read the
 * store's notifications and to reload its settings.
 *
 * The launcher cannot read the catalogs of the cell's database, so every
 * cycle publishes the store's connection options (server and user mapping
 * of the user the cycle runs as: the bootstrap superuser, or PUBLIC) and
 * the cell id in shared memory; the launcher (re)connects with them. Only
 * server processes can read shared memory.
 *
 * The queue: a COMMIT callback pushes (uuid, 'd') after it committed the
 * lease at the store, so the local row goes within a second instead of
 * waiting for the backend's next transaction or a reconcile pass; with
 * claims_cell.finish_leases_in = 'worker', the COMMIT and ABORT callbacks
 * push (uuid, 'c', 'r', or 'R' for a lease whose begin was given up)
 * instead of calling the store at all; a finish the callbacks could not
 * make is pushed the same way. A finish the store could not be reached for
 * waits in the queue for its next try (cell_cycle_drain). A full
 * queue, a backend of another database or a server without the worker
 * falls back to what the backend does alone. Entries lost in a crash are
 * what reconcile() is for: a committed lease keeps its local row.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"
#include "refusal.h"

#include "access/xlog.h"
#include "bgw_database.h"

#include <limits.h>

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "libpq-fe.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#define CELL_WORKER_NAME		"claims_cell worker"
#define CELL_CYCLE_NAME			"claims_cell worker cycle"
#define CELL_QUEUE_LEN			4096
#define CELL_DRAIN_BATCH		1000
#define CELL_CYCLE_LINGER_MS	1000
#define CELL_CYCLE_GAP_MS		100
#define CELL_CYCLE_MAX_LIFE_MS	2000
#define CELL_VERIFY_SLICE_MS	10000
#define CELL_UNCONFIGURED_RETRY_MS	5000
#define CELL_RETRY_FIRST_MS		100
#define CELL_RETRY_MAX_MS		1000
#define CELL_FULL_SCAN_EVERY_S	3600
#define CELL_LISTEN_RETRY_MAX_S	60
#define CELL_OPTIONS_LEN		4096

/* Settings. */
char	   *cell_worker_database = NULL;
int			cell_reconcile_interval_s = 60;
int			cell_finish_leases_in = CELL_FINISH_IN_COMMIT;

static const struct config_enum_entry cell_finish_options[] = {
	{"commit", CELL_FINISH_IN_COMMIT, false},
	{"worker", CELL_FINISH_IN_WORKER, false},
	{NULL, 0, false}
};

/* One lease for the worker: 'c' commit, 'r' roll back, 'd' delete the row. */
typedef struct CellQueueEntry
{
	char		uuid[UUID_LEN * 2 + 5];
	char		action;			/* 'd', 'c', 'r', or 'R': a rollback in doubt */
	int			tries;			/* failed tries so far */
	TimestampTz due;			/* not tried before then; 0: at once */
	TimestampTz until;			/* retried until then; 0: not failed yet */
} CellQueueEntry;

/* What the launcher, the cycles and the backends share. */
typedef struct CellWorkerShared
{
	slock_t		mutex;
	Oid			dboid;			/* claims_cell.database, InvalidOid if none */
	Latch	   *launcher_latch;
	Latch	   *cycle_latch;	/* the running cycle's, or NULL */
	int64		cell_id;		/* published by a cycle; 0 unknown */
	uint64		options_version;	/* bumped when options change */
	char		options[CELL_OPTIONS_LEN];	/* "k\0v\0...\0" of the store */
	bool		logged_waiting; /* said why cycles have nothing to do */
	int			head;
	int			count;
	CellQueueEntry queue[CELL_QUEUE_LEN];
} CellWorkerShared;

/* What the launcher hands a cycle in bgw_extra. */
typedef struct CellCycleArgs
{
	Oid			dboid;
	bool		reconcile;
	bool		full_scan;
	TimestampTz end_by;			/* stop lingering then: the launcher's turn */
} CellCycleArgs;

StaticAssertDecl(sizeof(CellCycleArgs) <= BGW_EXTRALEN, "CellCycleArgs does not fit in bgw_extra");

static CellWorkerShared *cell_worker = NULL;

PGDLLEXPORT void claims_cell_worker_main(Datum main_arg) pg_attribute_noreturn();
PGDLLEXPORT void claims_cell_cycle_main(Datum main_arg);

/* Define the worker's settings (with or without preloading). */
void
cell_worker_define_gucs(void)
{
	DefineCustomIntVariable("claims_cell.reconcile_interval",
							"Time between two passes of claims_cell.reconcile() by the background worker.",
							NULL,
							&cell_reconcile_interval_s,
							60, 1, INT_MAX / 1000,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomEnumVariable("claims_cell.finish_leases_in",
							 "Where leases are committed or rolled back at the store after the local transaction ends.",
							 "commit: in the backend's commit callback; worker: by the background worker.",
							 &cell_finish_leases_in,
							 CELL_FINISH_IN_COMMIT, cell_finish_options,
							 PGC_SUSET, 0,
							 NULL, NULL, NULL);
}

/* Define claims_cell.database and register the launcher (preload only). */
void
cell_worker_register(void)
{
	BackgroundWorker worker;

	DefineCustomStringVariable("claims_cell.database",
							   "Database the claims_cell background worker works in; empty: none.",
							   NULL,
							   &cell_worker_database,
							   "",
							   PGC_SIGHUP, 0,
							   NULL, NULL, NULL);

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	strlcpy(worker.bgw_library_name, "claims_cell", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "claims_cell_worker_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, CELL_WORKER_NAME, BGW_MAXLEN);
	strlcpy(worker.bgw_type, CELL_WORKER_NAME, BGW_MAXLEN);
	RegisterBackgroundWorker(&worker);
}

/* Request the worker's shared memory. */
void
cell_worker_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(CellWorkerShared)));
}

/* Create or attach the worker's shared memory. */
void
cell_worker_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	cell_worker = ShmemInitStruct("claims_cell worker", sizeof(CellWorkerShared), &found);
	if (!found)
	{
		memset(cell_worker, 0, sizeof(CellWorkerShared));
		SpinLockInit(&cell_worker->mutex);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Hand a lease to the worker; false when there is none for this database
 * or its queue is full (the caller then does the work itself). Called in
 * commit and abort callbacks: takes a spinlock, allocates nothing.
 */
bool
cell_worker_push(const char *uuid, char action)
{
	Latch	   *latch;
	bool		pushed = false;

	if (cell_worker == NULL || !OidIsValid(MyDatabaseId))
		return false;
	SpinLockAcquire(&cell_worker->mutex);
	if (cell_worker->dboid == MyDatabaseId && cell_worker->launcher_latch != NULL &&
		cell_worker->count < CELL_QUEUE_LEN)
	{
		CellQueueEntry *e = &cell_worker->queue[(cell_worker->head + cell_worker->count) % CELL_QUEUE_LEN];

		memset(e, 0, sizeof(*e));
		strlcpy(e->uuid, uuid, sizeof(e->uuid));
		e->action = action;
		cell_worker->count++;
		pushed = true;
	}
	latch = cell_worker->cycle_latch ? cell_worker->cycle_latch : cell_worker->launcher_latch;
	SpinLockRelease(&cell_worker->mutex);
	if (pushed)
		SetLatch(latch);
	return pushed;
}

/*
 * Take up to max entries that are due off the queue; returns how many.
 * Entries waiting for a retry keep their order.
 */
static int
cell_worker_pop(CellQueueEntry *out, int max)
{
	int			n = 0;
	TimestampTz now = GetCurrentTimestamp();

	SpinLockAcquire(&cell_worker->mutex);
	for (int left = cell_worker->count; left > 0; left--)
	{
		CellQueueEntry e = cell_worker->queue[cell_worker->head];

		cell_worker->head = (cell_worker->head + 1) % CELL_QUEUE_LEN;
		if (n < max && e.due <= now)
		{
			out[n++] = e;
			cell_worker->count--;
		}
		else					/* to the tail, behind the others */
			cell_worker->queue[(cell_worker->head + cell_worker->count - 1) % CELL_QUEUE_LEN] = e;
	}
	SpinLockRelease(&cell_worker->mutex);
	return n;
}

/*
 * Put an entry back for a retry at its due time (the cycle that failed
 * it); false when the queue is full.
 */
static bool
cell_worker_requeue(const CellQueueEntry *e)
{
	bool		queued = false;

	SpinLockAcquire(&cell_worker->mutex);
	if (cell_worker->count < CELL_QUEUE_LEN)
	{
		cell_worker->queue[(cell_worker->head + cell_worker->count) % CELL_QUEUE_LEN] = *e;
		cell_worker->count++;
		queued = true;
	}
	SpinLockRelease(&cell_worker->mutex);
	return queued;
}

/* Whether the last cycle found the extension missing or unconfigured. */
static bool
cell_worker_unconfigured(void)
{
	bool		waiting;

	SpinLockAcquire(&cell_worker->mutex);
	waiting = cell_worker->logged_waiting;
	SpinLockRelease(&cell_worker->mutex);
	return waiting;
}

/*
 * Whether the queue holds work due now; *next (when not NULL) is set to
 * the earliest due time of the entries waiting for a retry, 0 if none.
 */
static bool
cell_worker_queue_due(TimestampTz *next)
{
	bool		due = false;
	TimestampTz now = GetCurrentTimestamp();
	TimestampTz first = 0;

	SpinLockAcquire(&cell_worker->mutex);
	for (int i = 0; i < cell_worker->count; i++)
	{
		CellQueueEntry *e = &cell_worker->queue[(cell_worker->head + i) % CELL_QUEUE_LEN];

		if (e->due <= now)
		{
			due = true;
			break;
		}
		if (first == 0 || e->due < first)
			first = e->due;
	}
	SpinLockRelease(&cell_worker->mutex);
	if (next)
		*next = due ? now : first;
	return due;
}

/* Whether the queue holds work due now. */
static bool
cell_worker_queue_busy(void)
{
	return cell_worker_queue_due(NULL);
}

/*
 * Launcher: the OID of claims_cell.database when it exists and accepts
 * connections, else InvalidOid (logged once per change).
 */
static Oid
cell_worker_find_database(void)
{
	static int	last_state = -1;
	int			state = -2;		/* not set; else a ClaimsBgwDatabaseState */
	Oid			dboid = InvalidOid;

	if (cell_worker_database != NULL && cell_worker_database[0] != '\0')
		state = claims_bgw_find_database(cell_worker_database, &dboid);

	if (state != last_state)
	{
		if (state == -2)
			ereport(LOG,
					(errmsg("claims_cell: claims_cell.database is not set; the background worker waits")));
		else if (state == CLAIMS_BGW_DB_MISSING)
			ereport(LOG,
					(errmsg("claims_cell: database \"%s\" does not exist; the background worker waits until it is created",
							cell_worker_database)));
		else if (state == CLAIMS_BGW_DB_NO_CONNECTIONS)
			ereport(LOG,
					(errmsg("claims_cell: database \"%s\" does not allow connections; the background worker waits",
							cell_worker_database)));
		else
			ereport(LOG,
					(errmsg("claims_cell: background worker serving database \"%s\"",
							cell_worker_database)));
		last_state = state;
	}

	SpinLockAcquire(&cell_worker->mutex);
	if (cell_worker->dboid != dboid)
	{
		/* another database: its leases and store are not the old one's */
		cell_worker->dboid = dboid;
		cell_worker->head = cell_worker->count = 0;
		cell_worker->cell_id = 0;
		cell_worker->options[0] = '\0';
		cell_worker->options_version++;
		cell_worker->logged_waiting = false;
	}
	SpinLockRelease(&cell_worker->mutex);
	return dboid;
}

/*
 * Launcher: start a cycle and wait until it has exited. False when no
 * background worker slot was free.
 */
static bool
cell_worker_run_cycle(Oid dboid, bool reconcile, bool full_scan, TimestampTz end_by)
{
	static bool logged_no_slot = false;
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;
	CellCycleArgs args;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	strlcpy(worker.bgw_library_name, "claims_cell", BGW_MAXLEN);
	strlcpy(worker.bgw_function_name, "claims_cell_cycle_main", BGW_MAXLEN);
	strlcpy(worker.bgw_name, CELL_CYCLE_NAME, BGW_MAXLEN);
	strlcpy(worker.bgw_type, CELL_CYCLE_NAME, BGW_MAXLEN);
	worker.bgw_notify_pid = MyProcPid;
	args.dboid = dboid;
	args.reconcile = reconcile;
	args.full_scan = full_scan;
	args.end_by = end_by;
	memcpy(worker.bgw_extra, &args, sizeof(args));

	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		if (!logged_no_slot)
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("claims_cell: could not start a worker cycle: no background worker slot is free"),
					 errhint("Raise max_worker_processes.")));
		logged_no_slot = true;
		return false;
	}
	logged_no_slot = false;
	if (WaitForBackgroundWorkerShutdown(handle) == BGWH_POSTMASTER_DIED)
		proc_exit(1);
	pfree(handle);
	return true;
}

/*
 * Launcher: bring the LISTEN connection in line with the options the last
 * cycle published. Returns the socket to wait on, or PGINVALID_SOCKET.
 */
static pgsocket
cell_worker_listen(uint64 *version, TimestampTz *retry_at, int *backoff_s)
{
	uint64		v;
	char		options[CELL_OPTIONS_LEN];
	CellCallResult r;

	SpinLockAcquire(&cell_worker->mutex);
	v = cell_worker->options_version;
	memcpy(options, cell_worker->options, CELL_OPTIONS_LEN);
	SpinLockRelease(&cell_worker->mutex);

	if (v != *version)
	{
		*version = v;
		cell_conn_load_options(options);
		*retry_at = 0;
		*backoff_s = 1;
	}
	if (options[0] == '\0')
		return PGINVALID_SOCKET;
	if (cell_conn_socket() != PGINVALID_SOCKET)
		return cell_conn_socket();
	if (GetCurrentTimestamp() < *retry_at)
		return PGINVALID_SOCKET;

	cell_call("LISTEN claims_stale_leases", 0, NULL, true, &r);
	if (r.status == CELL_CALL_OK)
	{
		ereport(LOG,
				(errmsg("claims_cell: listening for stale lease reports of the claims store at %s",
						cell_server_label())));
		*backoff_s = 1;
		return cell_conn_socket();
	}
	ereport(LOG,
			(errmsg("claims_cell: could not listen for stale lease reports at %s: %s; trying again in %d s",
					cell_server_label(), r.message ? r.message : "unknown failure", *backoff_s)));
	*retry_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), (int64) *backoff_s * 1000);
	*backoff_s = Min(*backoff_s * 2, CELL_LISTEN_RETRY_MAX_S);
	return PGINVALID_SOCKET;
}

/* Entry point of the launcher. */
void
claims_cell_worker_main(Datum main_arg)
{
	TimestampTz next_pass;
	TimestampTz last_pass;
	TimestampTz last_full = 0;
	TimestampTz listen_retry = 0;
	TimestampTz next_cycle = 0;
	int			listen_backoff = 1;
	uint64		options_version = 0;
	bool		notified = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname(CELL_WORKER_NAME);

	SpinLockAcquire(&cell_worker->mutex);
	cell_worker->launcher_latch = MyLatch;
	cell_worker->cycle_latch = NULL;
	SpinLockRelease(&cell_worker->mutex);

	/* the first pass at once: it settles what a crash left */
	next_pass = last_pass = GetCurrentTimestamp();
	for (;;)
	{
		TimestampTz now;
		Oid			dboid;
		pgsocket	sock;
		long		delay;
		int			rc;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			/* a new interval counts from the last pass */
			next_pass = Min(next_pass, TimestampTzPlusMilliseconds(last_pass,
																   (int64) cell_reconcile_interval_s * 1000));
		}

		dboid = cell_worker_find_database();
		now = GetCurrentTimestamp();
		if (OidIsValid(dboid) && now >= next_cycle &&
			(now >= next_pass || notified || cell_worker_queue_busy()))
		{
			bool		pass = now >= next_pass || notified;
			bool		full = notified ||
				TimestampDifferenceExceeds(last_full, now, CELL_FULL_SCAN_EVERY_S * 1000);
			TimestampTz end_by = pass ?
				TimestampTzPlusMilliseconds(now, (int64) cell_reconcile_interval_s * 1000) : next_pass;

			/* back for the next pass, a notification or a reload in time */
			end_by = Min(end_by, TimestampTzPlusMilliseconds(now, CELL_CYCLE_MAX_LIFE_MS));

			if (claims_bgw_database_wanted(dboid))
				ereport(DEBUG1,
						(errmsg("claims_cell: worker cycle skipped: another session waits for database \"%s\"",
								cell_worker_database)));
			else if (cell_worker_run_cycle(dboid, pass, pass && full, end_by) && pass)
			{
				notified = false;
				if (full)
					last_full = now;
			}
			if (pass)
			{
				last_pass = now;
				next_pass = TimestampTzPlusMilliseconds(now, (int64) cell_reconcile_interval_s * 1000);
			}
			/* until the extension is created and configured, look again soon */
			if (cell_worker_unconfigured())
				next_pass = Min(next_pass, TimestampTzPlusMilliseconds(now, CELL_UNCONFIGURED_RETRY_MS));
			/* a cycle lingers while work comes: never start them back to back */
			next_cycle = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), CELL_CYCLE_GAP_MS);
		}

		sock = OidIsValid(dboid) ? cell_worker_listen(&options_version, &listen_retry, &listen_backoff)
			: PGINVALID_SOCKET;
		now = GetCurrentTimestamp();
		delay = TimestampDifferenceMilliseconds(now, next_pass);
		if (sock == PGINVALID_SOCKET && listen_retry > now)
			delay = Min(delay, TimestampDifferenceMilliseconds(now, listen_retry));
		{
			TimestampTz next_due;

			/* work due now, or a retry due later */
			if (cell_worker_queue_due(&next_due))
				delay = Min(delay, TimestampDifferenceMilliseconds(now, next_cycle));
			else if (next_due != 0)
				delay = Min(delay, TimestampDifferenceMilliseconds(now, Max(next_due, next_cycle)));
		}
		/* a reload signalled while a cycle ran: its latch wakeup was consumed */
		if (ConfigReloadPending)
			delay = 0;
		rc = WaitLatchOrSocket(MyLatch,
							   WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH |
							   (sock != PGINVALID_SOCKET ? WL_SOCKET_READABLE : 0),
							   sock, Max(delay, 0), PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (rc & WL_SOCKET_READABLE)
		{
			int64		cell_id;

			SpinLockAcquire(&cell_worker->mutex);
			cell_id = cell_worker->cell_id;
			SpinLockRelease(&cell_worker->mutex);
			if (cell_conn_take_notifications("claims_stale_leases", cell_id))
			{
				ereport(LOG,
						(errmsg("claims_cell: the claims store reports stale leases of cell %lld; reconciling now",
								(long long) cell_id)));
				notified = true;
			}
		}
	}
}

/*
 * Cycle: publish the store's connection options and the cell id for the
 * launcher. Returns the server's OID, or InvalidOid when the extension is
 * missing or not configured (said once until that changes).
 */
static Oid
cell_cycle_configuration(int64 *cell_id)
{
	Oid			serverid = InvalidOid;
	const char *why = NULL;
	StringInfoData opts;
	List	   *kw,
			   *vals;
	ListCell   *lk,
			   *lv;
	bool		logged;

	*cell_id = 0;
	if (!OidIsValid(get_extension_oid("claims_cell", true)))
		why = "extension \"claims_cell\" is not installed";
	else
	{
		int			ret = SPI_execute(CELL_CONFIGURATION_SQL, true, 1);
		bool		isnull,
					n1,
					n2;

		if (ret != SPI_OK_SELECT)
			elog(ERROR, "claims_cell: reading the configuration failed: %s", SPI_result_code_string(ret));
		if (SPI_processed == 0)
			why = "claims_cell is not configured";
		else if (!((void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &n1), n1) &&
				 !((void) SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &n2), n2) &&
				 (DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &n1)) !=
				  (int64) GetSystemIdentifier() ||
				  DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &n2)) !=
				  MyDatabaseId))
			why = "this database is a copy of a cell's database (claims_cell.configure() ran elsewhere)";
		else
		{
			serverid = cell_server_oid(SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1), false);
			*cell_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
		}
	}

	SpinLockAcquire(&cell_worker->mutex);
	logged = cell_worker->logged_waiting;
	cell_worker->logged_waiting = (why != NULL);
	SpinLockRelease(&cell_worker->mutex);
	if (why != NULL)
	{
		if (!logged)
			ereport(LOG,
					(errmsg("claims_cell: %s in database \"%s\"; the background worker waits",
							why, get_database_name(MyDatabaseId))));
		return InvalidOid;
	}

	initStringInfo(&opts);
	cell_conn_options(serverid, GetUserId(), &kw, &vals, &(bool){false});
	forboth(lk, kw, lv, vals)
	{
		appendBinaryStringInfo(&opts, lfirst(lk), strlen(lfirst(lk)) + 1);
		appendBinaryStringInfo(&opts, lfirst(lv), strlen(lfirst(lv)) + 1);
	}
	appendStringInfoChar(&opts, '\0');
	if (opts.len > CELL_OPTIONS_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("claims_cell: the store's connection options are longer than %d bytes", CELL_OPTIONS_LEN)));
	SpinLockAcquire(&cell_worker->mutex);
	if (cell_worker->cell_id != *cell_id || memcmp(cell_worker->options, opts.data, opts.len) != 0)
	{
		memcpy(cell_worker->options, opts.data, opts.len);
		cell_worker->cell_id = *cell_id;
		cell_worker->options_version++;
	}
	SpinLockRelease(&cell_worker->mutex);
	return serverid;
}

/* Cycle: start one transaction with SPI and a snapshot. */
static void
cell_cycle_begin(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "claims_cell: SPI_connect failed");
	pgstat_report_activity(STATE_RUNNING, activity);
}

/* Cycle: end the transaction begun by cell_cycle_begin. */
static void
cell_cycle_end(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Cycle: finish a batch of queued leases at the store and delete the
 * local rows of those settled. A refusal is final (a committed lease keeps
 * its row for reconcile()). A lease the store could not be reached for is
 * tried again, after 100 ms doubling up to a second, until the store
 * answers or stale_after has passed (then reconcile() settles it), and
 * once one call of the batch failed so, the rest wait for the next try
 * without a call. A rollback in doubt ('R': its begin was given up, and
 * may still be applied when a frozen store wakes) is tried again the same
 * way even when the store says the lease is unknown, for that begin may
 * arrive later: the lease is rolled back as soon as it exists.
 */
static void
cell_cycle_drain(CellQueueEntry *batch, int n, int64 cell_id)
{
	StringInfoData done;
	char		idbuf[32];
	int			ndone = 0;
	bool		store_down = false;

	snprintf(idbuf, sizeof(idbuf), "%lld", (long long) cell_id);
	initStringInfo(&done);
	appendStringInfoChar(&done, '{');
	for (int i = 0; i < n; i++)
	{
		CellQueueEntry *e = &batch[i];
		bool		settled = (e->action == 'd');
		bool		commit = (e->action == 'c');
		bool		retry = false;

		if (!settled && !store_down)
		{
			const char *params[2] = {idbuf, e->uuid};
			CellCallResult r;

			cell_call_finish(commit ? "SELECT %s.claims_commit($1::bigint, $2::uuid)"
							 : "SELECT %s.claims_rollback($1::bigint, $2::uuid)",
							 2, params, true, &r);
			if (r.status == CELL_CALL_OK)
				cell_stats_count(commit ? CELL_STAT_COMMITS : CELL_STAT_ROLLBACKS);
			settled = r.status == CELL_CALL_OK ||
				(e->action == 'r' && r.status == CELL_CALL_REMOTE_ERROR && strcmp(r.sqlstate, CLAIMS_SQLSTATE_NOT_FOUND) == 0);
			store_down = r.status != CELL_CALL_OK && r.status != CELL_CALL_REMOTE_ERROR;
			retry = store_down ||
				(e->action == 'R' && r.status == CELL_CALL_REMOTE_ERROR && strcmp(r.sqlstate, CLAIMS_SQLSTATE_NOT_FOUND) == 0);
			/* a retry is said once; a final refusal always */
			if (!settled && (e->tries == 0 || !retry))
				ereport(retry ? LOG : WARNING,
						(errmsg("claims_cell: could not %s lease %s at the claims store: %s",
								commit ? "commit" : "roll back", e->uuid,
								r.message ? r.message : "unknown failure"),
						 retry
						 ? errdetail("The background worker tries again until the store answers.")
						 : errdetail("claims_cell.reconcile() settles it later.")));
		}
		else if (!settled)
			retry = true;		/* the store did not answer this batch */
		if (retry)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (e->until == 0)
				e->until = TimestampTzPlusMilliseconds(now, (int64) cell_stale_after_s * 1000);
			if (now < e->until)
			{
				e->due = TimestampTzPlusMilliseconds(now, Min((int64) CELL_RETRY_FIRST_MS << Min(e->tries, 10),
															  CELL_RETRY_MAX_MS));
				e->tries++;
				if (cell_worker_requeue(e))
					continue;
			}
			if (e->action != 'R' || store_down)
				ereport(WARNING,
						(errmsg("claims_cell: gave up trying to %s lease %s at the claims store",
								commit ? "commit" : "roll back", e->uuid),
						 errdetail("claims_cell.reconcile() settles it later.")));
		}
		if (e->action != 'c' && e->action != 'd')
			continue;			/* an aborted transaction left no row */
		if (settled)
			appendStringInfo(&done, "%s%s", ndone++ > 0 ? "," : "", e->uuid);
	}
	appendStringInfoChar(&done, '}');
	if (ndone > 0)
	{
		Datum		arg = OidInputFunctionCall(F_ARRAY_IN, done.data, UUIDOID, -1);
		Oid			argtype = UUIDARRAYOID;
		int			ret;

		/* skip rows a reconcile() pass holds: it deletes them itself */
		ret = SPI_execute_with_args("DELETE FROM claims_cell.outstanding_leases"
									" WHERE uuid OPERATOR(pg_catalog.=) ANY (ARRAY("
									" SELECT l.uuid FROM claims_cell.outstanding_leases l"
									" WHERE l.uuid OPERATOR(pg_catalog.=) ANY ($1) AND NOT l.fence"
									" FOR UPDATE SKIP LOCKED))",
									1, &argtype, &arg, NULL, false, 0);
		if (ret != SPI_OK_DELETE)
			elog(ERROR, "claims_cell: deleting finished leases failed: %s", SPI_result_code_string(ret));
	}
}

/* Whether this cycle is inside a reconcile() pass. */
static bool cell_cycle_reconciling = false;

/*
 * Cycle exit: a pass that did not return (an error, which ends the cycle,
 * or a termination) counts as a failed pass.
 */
static void
cell_cycle_count_failure(int code, Datum arg)
{
	if (cell_cycle_reconciling)
		cell_stats_count(CELL_STAT_RECONCILE_FAILURES);
	cell_cycle_reconciling = false;
}

/* Cycle: one reconcile() pass, its counts logged when it did anything. */
static void
cell_cycle_reconcile(bool full_scan)
{
	Datum		arg = BoolGetDatum(full_scan);
	Oid			argtype = BOOLOID;
	int			ret;
	int64		counts[4];
	bool		isnull;

	/*
	 * reconcile() waits for its lock; a manual reconcile() left in an open
	 * transaction would hold the worker there. Take the lock without
	 * waiting first (reconcile() then takes it again at once) and skip
	 * the pass when someone else holds it.
	 */
	ret = SPI_execute("SELECT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('claims_cell.reconcile'))",
					  false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "claims_cell: taking reconcile()'s lock failed: %s", SPI_result_code_string(ret));
	if (!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
	{
		ereport(LOG,
				(errmsg("claims_cell: reconcile pass skipped: another session's claims_cell.reconcile() holds its lock")));
		return;
	}
	ret = SPI_execute_with_args("SELECT * FROM claims_cell.reconcile($1)", 1, &argtype, &arg,
								NULL, false, 1);
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "claims_cell: reconcile() failed: %s", SPI_result_code_string(ret));
	for (int i = 0; i < 4; i++)
		counts[i] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull));
	cell_stats_reconcile(counts[0], counts[1], counts[2], counts[3]);
	if (counts[0] + counts[1] + counts[2] > 0)
		ereport(LOG,
				(errmsg("claims_cell: reconcile%s: %lld committed, %lld rolled back, %lld orphans deleted, %lld pending",
						full_scan ? " (full scan)" : "",
						(long long) counts[0], (long long) counts[1],
						(long long) counts[2], (long long) counts[3])));
}

/*
 * Cycle: one step of the verifications whose turn it is: one batch of one
 * table (claims_cell.verify_due('0')), its counts logged and counted.
 * Returns the number of tables worked on: 0 when none is due.
 */
static uint64
cell_cycle_verify_step(void)
{
	int			ret;
	uint64		nrows;

	ret = SPI_execute("SELECT table_name::pg_catalog.text, missing, extra, drifted, repaired,"
					  " skipped_recent, finished FROM claims_cell.verify_due('0')", false, 0);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "claims_cell: verify_due() failed: %s", SPI_result_code_string(ret));
	nrows = SPI_processed;
	for (uint64 row = 0; row < nrows; row++)
	{
		HeapTuple	tup = SPI_tuptable->vals[row];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *table = SPI_getvalue(tup, desc, 1);
		int64		counts[5];
		bool		isnull;
		bool		finished;

		for (int i = 0; i < 5; i++)
			counts[i] = DatumGetInt64(SPI_getbinval(tup, desc, i + 2, &isnull));
		finished = DatumGetBool(SPI_getbinval(tup, desc, 7, &isnull));
		if (finished)
		{
			cell_stats_verify(counts[0], counts[1], counts[2], counts[3]);
			ereport(LOG,
					(errmsg("claims_cell: verified table %s: %lld missing, %lld extra, %lld drifted, %lld repaired, %lld skipped as recent",
							table, (long long) counts[0], (long long) counts[1],
							(long long) counts[2], (long long) counts[3], (long long) counts[4])));
		}
		else
			ereport(DEBUG1,
					(errmsg("claims_cell: verifying table %s: %lld missing, %lld extra, %lld drifted, %lld repaired so far",
							table, (long long) counts[0], (long long) counts[1],
							(long long) counts[2], (long long) counts[3])));
	}
	return nrows;
}

/*
 * Cycle: the verifications whose turn it is, for about
 * CELL_VERIFY_SLICE_MS, one batch per transaction: between two batches the
 * cycle yields to a command that waits to have the database alone (DROP
 * DATABASE waits only 5 s for other sessions). Nothing before the
 * extension is updated to 1.3.
 */
static void
cell_cycle_verify(void)
{
	TimestampTz end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), CELL_VERIFY_SLICE_MS);
	int			ret;
	bool		present;
	uint64		worked;

	cell_cycle_begin("claims_cell: verify");
	ret = SPI_execute("SELECT pg_catalog.to_regprocedure('claims_cell.verify_due(interval)') IS NOT NULL",
					  true, 1);
	present = ret == SPI_OK_SELECT && SPI_processed == 1 &&
		DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &(bool){0}));
	cell_cycle_end();
	if (!present)
		return;
	do
	{
		CHECK_FOR_INTERRUPTS();
		if (claims_bgw_database_wanted(MyDatabaseId))
		{
			ereport(DEBUG1,
					(errmsg("claims_cell: verification paused: another session waits for the database")));
			return;
		}
		cell_cycle_begin("claims_cell: verify");
		worked = cell_cycle_verify_step();
		cell_cycle_end();
	} while (worked > 0 && GetCurrentTimestamp() < end);
}

/* Cycle exit: backends wake the launcher again. */
static void
cell_cycle_forget_latch(int code, Datum arg)
{
	SpinLockAcquire(&cell_worker->mutex);
	cell_worker->cycle_latch = NULL;
	SpinLockRelease(&cell_worker->mutex);
}

/* Entry point of a cycle: drain the queue, reconcile when asked, linger. */
void
claims_cell_cycle_main(Datum main_arg)
{
	CellCycleArgs args;
	CellQueueEntry *batch;
	Oid			serverid;
	int64		cell_id;

	memcpy(&args, MyBgworkerEntry->bgw_extra, sizeof(args));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(args.dboid, InvalidOid, 0);
	pgstat_report_appname(CELL_CYCLE_NAME);
	/* reconcile() needs READ COMMITTED; the calls need no other path */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);

	cell_cycle_begin("claims_cell: reading the configuration");
	serverid = cell_cycle_configuration(&cell_id);
	cell_cycle_end();
	batch = palloc(sizeof(CellQueueEntry) * CELL_DRAIN_BATCH);
	if (!OidIsValid(serverid))
	{
		/* nothing to finish without a store: reconcile() will see */
		while (cell_worker_pop(batch, CELL_DRAIN_BATCH) > 0)
			;
		return;
	}

	SpinLockAcquire(&cell_worker->mutex);
	cell_worker->cycle_latch = MyLatch;
	SpinLockRelease(&cell_worker->mutex);
	before_shmem_exit(cell_cycle_forget_latch, (Datum) 0);

	for (bool first = true;; first = false)
	{
		int			n;
		long		linger;

		CHECK_FOR_INTERRUPTS();
		while ((n = cell_worker_pop(batch, CELL_DRAIN_BATCH)) > 0)
		{
			cell_cycle_begin("claims_cell: finishing leases");
			cell_conn_prepare(serverid);
			cell_cycle_drain(batch, n, cell_id);
			cell_cycle_end();
			/* what is left goes to the next cycle */
			if (GetCurrentTimestamp() >= args.end_by)
				break;
		}
		if (first && args.reconcile)
		{
			before_shmem_exit(cell_cycle_count_failure, (Datum) 0);
			cell_cycle_reconciling = true;
			cell_cycle_begin("claims_cell: reconcile");
			cell_cycle_reconcile(args.full_scan);
			cell_cycle_end();
			cell_cycle_reconciling = false;
			cell_cycle_verify();
			continue;
		}
		if (claims_bgw_database_wanted(MyDatabaseId))
			break;
		/* the launcher's turn: a pass is due, or a notification may wait */
		linger = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), args.end_by);
		if (linger <= 0)
			break;
		if (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					  Min(linger, CELL_CYCLE_LINGER_MS), PG_WAIT_EXTENSION) & WL_TIMEOUT)
		{
			if (!cell_worker_queue_busy())
				break;
		}
		ResetLatch(MyLatch);
	}
}
