--
-- Finishing a creates-only lease finds it by its primary key, however the
-- statistics make the partial index of outstanding leases look: after many
-- finished leases of one cell and an ANALYZE that counts none outstanding,
-- that index seems empty, while until the next vacuum it still holds an
-- entry for each of them, which a lookup by (creator_id, uuid) would walk.
-- (The extension lives in claims_s since 14_schema.)
--
SET search_path = claims_s, public;
SET client_min_messages = warning;
SELECT claims_register_cell(1301, 'cell-1301', 'regress_cells') IS NOT NULL AS registered;
-- n creates-only leases of cell 1301, every second committed, the others
-- rolled back; the number finished.
CREATE FUNCTION finish_leases(n int, prefix text) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*)
    FROM generate_series(1, n) AS i,
         LATERAL (SELECT claims_s.claims_begin_update(req(1301, jsonb_build_array(rec('USERNAMES', prefix || i))))
                         ->> 'lease_uuid' AS lease) AS b,
         LATERAL (SELECT CASE WHEN i % 2 = 0 THEN claims_s.claims_commit(1301, b.lease::uuid)
                              ELSE claims_s.claims_rollback(1301, b.lease::uuid) END) AS f
$$;
SELECT finish_leases(600, 'fp-') AS finished;
ANALYZE claim_leases;
SELECT reltuples AS outstanding_in_statistics FROM pg_class WHERE relname = 'claim_leases_outstanding_idx';
SELECT pg_stat_force_next_flush();
SELECT (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'claim_leases_pkey') AS pkey,
       (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'claim_leases_outstanding_idx') AS outstanding
\gset before_
-- A new session, so that the statements are planned with these statistics
-- (the store prepares them as generic plans): ten commits and ten rollbacks,
-- each counted as a scan of the index that found its lease.
\c
SET search_path = claims_s, public;
SET client_min_messages = warning;
SELECT finish_leases(20, 'fp2-') AS finished;
SELECT pg_stat_force_next_flush();
SELECT (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'claim_leases_pkey')
         - :before_pkey >= 20 AS each_finish_by_primary_key,
       (SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'claim_leases_outstanding_idx')
         - :before_outstanding AS outstanding_index_scans;
