/* claims--1.1--1.2.sql: what the claims.v1 gRPC front and monitoring need from the store. */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.2'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- claims.v1 over gRPC: CommitUpdate and RollbackUpdate as proto3 JSON, and
-- the cells as CellInfo (GetCells, GetRecordResponse.cell_info).
-- ---------------------------------------------------------------------------

-- What CellInfo says of a cell besides its id: where it is served, the
-- prefix of its session cookies, and the ranges of sequence values it
-- alone uses (inclusive int64 ranges; an unbounded end stands for the
-- int64 limit). Set by claims_set_cell_info().
ALTER TABLE @extschema@.claim_cells
    ADD COLUMN address text CHECK (address <> ''),
    ADD COLUMN session_prefix text CHECK (session_prefix <> ''),
    ADD COLUMN sequence_ranges int8range[] NOT NULL DEFAULT '{}';

#include "udfs/claims_commit.jsonb/1.2.sql"

#include "udfs/claims_rollback.jsonb/1.2.sql"

#include "udfs/claims_get_cells/1.2.sql"

#include "udfs/claims_set_cell_info/1.2.sql"

COMMENT ON FUNCTION @extschema@.claims_commit(jsonb) IS
    'CommitUpdate with a CommitUpdateRequest as proto3 JSON; returns {}';
COMMENT ON FUNCTION @extschema@.claims_rollback(jsonb) IS
    'RollbackUpdate with a RollbackUpdateRequest as proto3 JSON; returns {}';
COMMENT ON FUNCTION @extschema@.claims_get_cells(jsonb) IS
    'GetCells: every registered cell as CellInfo (cells and administrators)';
COMMENT ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text) IS
    'Set a cell''s address, session prefix and sequence ranges (administrators)';

REVOKE ALL ON FUNCTION @extschema@.claims_commit(jsonb), @extschema@.claims_rollback(jsonb),
    @extschema@.claims_get_cells(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_commit(jsonb), @extschema@.claims_rollback(jsonb),
    @extschema@.claims_get_cells(jsonb) TO claims_cell, claims_admin;
REVOKE ALL ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text)
    TO claims_admin;


-- ---------------------------------------------------------------------------
-- Monitoring: per-cell statistics and the oldest outstanding lease of each
-- cell, for Prometheus (monitoring/) and any other monitoring system.
-- ---------------------------------------------------------------------------

#include "udfs/claims_stats_by_cell/1.2.sql"

CREATE VIEW @extschema@.claims_stats_by_cell AS
SELECT * FROM @extschema@.claims_stats_by_cell();

COMMENT ON FUNCTION @extschema@.claims_stats_by_cell() IS
    'claims_stats per cell since the last reset, and the stale lease reporter''s latest findings per cell';
COMMENT ON VIEW @extschema@.claims_stats_by_cell IS
    'claims_stats per cell since the last reset, and the stale lease reporter''s latest findings per cell';

REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_cell() FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claims_stats_by_cell FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_cell() TO pg_monitor;
GRANT SELECT ON TABLE @extschema@.claims_stats_by_cell TO pg_monitor;

-- The oldest outstanding lease of every registered cell, live: one probe
-- of claim_leases_outstanding_idx (creator_id, created_at, uuid) WHERE
-- state = 'outstanding' per cell (its first entry under the cell id), so
-- the cost grows with the number of cells, not of leases. A cell without
-- an outstanding lease has a row with NULLs and age 0. No payload: the view
-- shows no personal data and is readable by pg_monitor.
CREATE VIEW @extschema@.claims_oldest_leases AS
SELECT c.cell_id,
       o.uuid AS lease_uuid,
       o.created_at,
       COALESCE(pg_catalog.now() OPERATOR(pg_catalog.-) o.created_at,
                '0'::pg_catalog.interval) AS age
  FROM @extschema@.claim_cells c
  LEFT JOIN LATERAL (
       SELECT l.uuid, l.created_at
         FROM @extschema@.claim_leases l
        WHERE l.creator_id OPERATOR(pg_catalog.=) c.cell_id
          AND l.state OPERATOR(pg_catalog.=) 'outstanding'::@extschema@.claim_lease_state
        ORDER BY l.created_at, l.uuid
        LIMIT 1) o ON true;

COMMENT ON VIEW @extschema@.claims_oldest_leases IS
    'Per registered cell, its oldest outstanding lease and its age (0 when none); one index probe per cell';

REVOKE ALL ON TABLE @extschema@.claims_oldest_leases FROM PUBLIC;
GRANT SELECT ON TABLE @extschema@.claims_oldest_leases TO pg_monitor, claims_admin;

#include "udfs/claims_stats_by_bucket_type/1.2.sql"

CREATE VIEW @extschema@.claims_stats_by_bucket_type AS
SELECT s.bucket_type, t.name AS bucket_type_name,
       s.values_created, s.values_destroyed, s.values_replaced,
       s.conflicts_permanent, s.conflicts_temporary
  FROM @extschema@.claims_stats_by_bucket_type() s
  LEFT JOIN @extschema@.claim_bucket_types t
         ON t.type_id OPERATOR(pg_catalog.=) s.bucket_type;

COMMENT ON FUNCTION @extschema@.claims_stats_by_bucket_type() IS
    'Values changed and values at fault in conflicts per bucket type since the last reset';
COMMENT ON VIEW @extschema@.claims_stats_by_bucket_type IS
    'Values changed and values at fault in conflicts per bucket type since the last reset';

REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_bucket_type() FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claims_stats_by_bucket_type FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_bucket_type() TO pg_monitor;
GRANT SELECT ON TABLE @extschema@.claims_stats_by_bucket_type TO pg_monitor;
