CREATE OR REPLACE FUNCTION @extschema@.verify_due(max_time interval DEFAULT '10 seconds')
RETURNS TABLE (table_name regclass, missing bigint, extra bigint, drifted bigint,
               repaired bigint, skipped_recent bigint, finished boolean)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    st record;
    t record;
    r record;
    deadline timestamptz := pg_catalog.clock_timestamp() + max_time;
    worked boolean := false;
BEGIN
    st := @extschema@.verify_settings();
    DELETE FROM @extschema@.verify_progress p
     WHERE NOT EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c WHERE c.table_name = p.table_name);
    IF st.verify_interval <= interval '0' THEN
        RETURN;
    END IF;
    INSERT INTO @extschema@.verify_progress (table_name)
        SELECT DISTINCT c.table_name FROM @extschema@.claimed_attributes c WHERE c.enabled
        ON CONFLICT DO NOTHING;
    FOR t IN
        SELECT p.*, COALESCE(p.last_finished_at + st.verify_interval,
                             first.at + st.verify_interval *
                                 ((pg_catalog.hashint8(p.table_name::oid::bigint)::bigint & 1023) / 1024.0)) AS due_at
          FROM @extschema@.verify_progress p,
               LATERAL (SELECT pg_catalog.min(c.created_at) AS at FROM @extschema@.claimed_attributes c
                         WHERE c.table_name = p.table_name) first
         WHERE EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c WHERE c.table_name = p.table_name AND c.enabled)
         ORDER BY p.run_started_at IS NULL, due_at
    LOOP
        EXIT WHEN worked AND pg_catalog.clock_timestamp() >= deadline;
        CONTINUE WHEN t.run_started_at IS NULL AND t.due_at > pg_catalog.now();
        CONTINUE WHEN t.last_error_at > pg_catalog.now() - interval '5 minutes';
        CONTINUE WHEN NOT pg_catalog.pg_try_advisory_xact_lock(pg_catalog.hashtext('claims_cell.verify'),
                                                               t.table_name::oid::integer);
        worked := true;
        BEGIN
            r := @extschema@.verify_slice(t.table_name, true, t.resume_after, deadline);
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'claims_cell: verification of table % failed: %', t.table_name, SQLERRM;
            UPDATE @extschema@.verify_progress p SET last_error = SQLERRM, last_error_at = pg_catalog.now()
             WHERE p.table_name = t.table_name;
            CONTINUE;
        END;
        UPDATE @extschema@.verify_progress p SET
               run_started_at = CASE WHEN r.done THEN NULL ELSE COALESCE(p.run_started_at, pg_catalog.now()) END,
               resume_after = CASE WHEN r.done THEN NULL ELSE r.last_source_id END,
               missing = CASE WHEN p.run_started_at IS NULL THEN 0 ELSE p.missing END + r.missing,
               extra = CASE WHEN p.run_started_at IS NULL THEN 0 ELSE p.extra END + r.extra,
               drifted = CASE WHEN p.run_started_at IS NULL THEN 0 ELSE p.drifted END + r.drifted,
               repaired = CASE WHEN p.run_started_at IS NULL THEN 0 ELSE p.repaired END + r.repaired,
               skipped_recent = CASE WHEN p.run_started_at IS NULL THEN 0 ELSE p.skipped_recent END + r.skipped_recent,
               last_finished_at = CASE WHEN r.done THEN pg_catalog.now() ELSE p.last_finished_at END,
               last_error = NULL, last_error_at = NULL
         WHERE p.table_name = t.table_name
        RETURNING p.table_name, p.missing, p.extra, p.drifted, p.repaired, p.skipped_recent, r.done
             INTO table_name, missing, extra, drifted, repaired, skipped_recent, finished;
        RETURN NEXT;
    END LOOP;
END
$$;
COMMENT ON FUNCTION @extschema@.verify_due(interval) IS
    'The background worker''s scheduled verifications: the tables whose turn it is, resumed where they stopped';
REVOKE ALL ON FUNCTION @extschema@.verify_due(interval) FROM PUBLIC;
