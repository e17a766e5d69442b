/*-------------------------------------------------------------------------
 *
 * claims_cell.c
 *	  Module entry: settings, transaction callbacks and, when preloaded,
 *	  the shared-memory circuit breaker and the background worker.
 *
 *-------------------------------------------------------------------------
 */
#include "claims_cell.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/guc.h"

#include <limits.h>

PG_MODULE_MAGIC;

int			cell_call_timeout_ms = 300;
int			cell_connect_timeout_ms = 5000;
int			cell_max_concurrent_calls = 40;
int			cell_breaker_threshold = 5;
int			cell_breaker_cooldown_ms = 5000;
int			cell_breaker_probe_interval_ms = 200;
int			cell_max_batch_size = 1000;
int			cell_stale_after_s = 300;
int			cell_orphan_after_s = 3600;
int			cell_cleanup_after_s = 5;
int			cell_verify_recent_s = 3600;
int			cell_verify_interval_s = 7 * 24 * 3600;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

/* Ask for the breaker's shared memory (PG15 shmem_request_hook). */
static void
cell_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	cell_breaker_shmem_request();
	cell_worker_shmem_request();
}

/* Attach the breaker's shared memory. */
static void
cell_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	cell_breaker_shmem_startup();
	cell_worker_shmem_startup();
}

/*
 * Define the settings, register the transaction callbacks and, only when
 * loaded through shared_preload_libraries, the shared memory.
 */
void
_PG_init(void)
{
	DefineCustomIntVariable("claims_cell.call_timeout",
							"Deadline of one statement sent to the claims store.",
							"Connecting has its own bound, claims_cell.connect_timeout.",
							&cell_call_timeout_ms,
							300, 10, 60000,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.connect_timeout",
							"Deadline of opening a backend's connection to the claims store.",
							"A connection that is slow to open fails the call without counting towards opening the circuit breaker.",
							&cell_connect_timeout_ms,
							5000, 10, 600000,
							PGC_SUSET, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.max_concurrent_calls",
							"Most calls to the claims store in flight at once in one database.",
							"More fail at once with SQLSTATE 08006.",
							&cell_max_concurrent_calls,
							40, 1, 10000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.breaker_threshold",
							"Consecutive failed calls to the claims store that open the circuit breaker.",
							NULL,
							&cell_breaker_threshold,
							5, 1, 1000,
							PGC_SIGHUP, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.breaker_cooldown",
							"Time an open circuit breaker fails calls at once before it probes the store again.",
							NULL,
							&cell_breaker_cooldown_ms,
							5000, 10, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.breaker_probe_interval",
							"Time between two calls that probe the claims store while the circuit breaker is open; 0 probes only after the cooldown.",
							"A probe that reaches the store closes the breaker, so calls resume as soon as a failover ends.",
							&cell_breaker_probe_interval_ms,
							200, 0, 3600000,
							PGC_SIGHUP, GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("claims_cell.max_batch_size",
							"Most records one lease carries; a transaction with more takes several leases.",
							"Keep it at most the store's claims.max_batch_size.",
							&cell_max_batch_size,
							1000, 2, 100000,
							PGC_SUSET, 0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("claims_cell.stale_after",
							"Age after which reconcile() settles a lease still outstanding at the store.",
							"A lease with a local row is committed, one without is rolled back.",
							&cell_stale_after_s,
							300, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.orphan_after",
							"Age after which reconcile() deletes a local lease row whose lease the store rolled back or does not know.",
							NULL,
							&cell_orphan_after_s,
							3600, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.cleanup_after",
							"Age after which reconcile() deletes the local row of a lease the store says is committed.",
							NULL,
							&cell_cleanup_after_s,
							5, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("claims_cell.verify_recent",
							"Rows and claims changed more recently than this are skipped by verify().",
							"Recency comes from the table's updated_at column, else from commit timestamps when track_commit_timestamp is on, and from the claim's updated_at at the store.",
							&cell_verify_recent_s,
							3600, 0, INT_MAX,
							PGC_SUSET, GUC_UNIT_S,
							NULL, NULL, NULL);
	DefineCustomIntVariable("claims_cell.verify_interval",
							"Time between two verifications of a claimed table by the background worker; 0 turns them off.",
							NULL,
							&cell_verify_interval_s,
							7 * 24 * 3600, 0, INT_MAX,
							PGC_SIGHUP, GUC_UNIT_S,
							NULL, NULL, NULL);

	cell_worker_define_gucs();

	RegisterXactCallback(cell_xact_callback, NULL);
	RegisterSubXactCallback(cell_subxact_callback, NULL);
	cell_truncate_hook_init();
	cell_conn_init();

	if (!process_shared_preload_libraries_in_progress)
	{
		MarkGUCPrefixReserved("claims_cell");
		return;
	}
	cell_worker_register();
	MarkGUCPrefixReserved("claims_cell");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = cell_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = cell_shmem_startup;
}
