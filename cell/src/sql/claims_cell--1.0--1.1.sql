/* claims_cell--1.0--1.1.sql: reconciliation of leases left unsettled. */

\echo Use "ALTER EXTENSION claims_cell UPDATE TO '1.1'" to load this file. \quit

-- A fence is a row claims_cell.reconcile() inserts for a lease it found
-- outstanding at the store without a local row: it takes the lease's uuid
-- so that no local transaction can commit with that lease any more, and it
-- is deleted once the store has rolled the lease back.
ALTER TABLE @extschema@.outstanding_leases ADD COLUMN fence boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN @extschema@.outstanding_leases.fence IS
    'Inserted by reconcile() to roll the lease back: no local transaction may commit with it';

#include "udfs/store_list_leases/1.1.sql"

#include "udfs/store_finish_lease/1.1.sql"

#include "udfs/reconcile_settings/1.1.sql"

/*
 * reconcile(): settle what can be settled now between the store's
 * outstanding leases of this cell and the local lease rows.
 *
 *  store lists   | local row  | age                         | action                       | counted
 *  outstanding   | present    | row older than stale_after  | commit at the store, delete  | committed
 *  outstanding   | present    | younger                     | nothing (its COMMIT is       | pending
 *                |            |                             | finishing it)                |
 *  outstanding   | absent     | lease older than stale_after| fence (see below)            | pending
 *  outstanding   | absent     | younger                     | nothing                      | pending
 *  not listed    | present    | row older than cleanup_after| claims_commit as a check:    |
 *                |            |                             | success: delete the row      | orphans_deleted
 *                |            |                             | 55000/P0002 and older than   | orphans_deleted
 *                |            |                             | orphan_after: delete, WARNING|
 *                |            |                             | otherwise nothing            | pending
 *  any           | fence      |                             | roll back at the store,      | rolled_back
 *                |            |                             | delete the fence             | (orphans_deleted
 *                |            |                             |                              | when not listed)
 *
 * A local row that is visible is committed, so its local transaction
 * committed and committing its lease is always right: claims_commit is
 * idempotent for a committed lease, so it is also the check that a lease
 * the store no longer lists was committed (55000: rolled back, P0002:
 * unknown).
 *
 * The fence. "No local row" cannot be told from "inserted by a local
 * transaction that has not committed yet" (a COMMIT waiting for
 * synchronous replication or another PRE_COMMIT). So before rolling back,
 * the uuid is inserted here as a fence row (ON CONFLICT DO NOTHING):
 *  - a local transaction holding the uuid uncommitted is waited for; if it
 *    commits, nothing is inserted and the lease is committed instead; if
 *    it aborts, the fence goes in;
 *  - a local transaction that inserts the uuid later waits for this
 *    transaction and, once the fence is committed, fails at its own COMMIT
 *    with 40001 (PRE_COMMIT maps the conflict), rolling its lease back.
 * The store rollback waits for the next pass: it must not happen before
 * the fence is committed. Rolled back in the fencing transaction, a crash
 * or error before that transaction commits would remove the fence after
 * the lease was rolled back, and a waiting local transaction would commit
 * with a rolled-back lease; and a fence deleted in the transaction that
 * inserted it is dead when that transaction commits, so a waiter would
 * insert its row and commit just the same. A function cannot commit in
 * the middle, so one pass fences and commits, the next rolls back and
 * deletes the fence in one transaction: a crash between the store
 * rollback and that commit leaves the fence, and the pass after repeats
 * the rollback (idempotent) and deletes it. A committed fence is never
 * committed at the store, whatever its age.
 *
 * Listing: leases created after the earlier of now - 2 h and 10 minutes
 * (clock skew between the cell and the store) before the oldest local
 * row, so every local row's lease is in the window when outstanding;
 * full_scan => true lists every outstanding lease, which finds remote-only
 * leases older than 2 h. The caller (today an operator or a scheduler, a
 * background worker later) runs it often, and with full_scan about once
 * an hour.
 *
 * Passes are serialised by a transaction-level advisory lock and run in
 * READ COMMITTED (0A000 otherwise), so that each statement sees what the
 * previous pass and the waited-for local transactions committed. The store's
 * calls run under claims_cell.call_timeout and the circuit breaker; a
 * lease whose call fails is counted pending with a WARNING; a failed
 * listing raises.
 */
#include "udfs/reconcile/1.1.sql"

REVOKE ALL ON FUNCTION @extschema@.store_list_leases(name, jsonb),
    @extschema@.store_finish_lease(name, bigint, uuid, boolean),
    @extschema@.reconcile_settings(),
    @extschema@.reconcile(boolean) FROM PUBLIC;
