CREATE OR REPLACE FUNCTION @extschema@.verify("table" regclass, repair boolean DEFAULT false)
RETURNS TABLE (missing bigint, extra bigint, drifted bigint, repaired bigint, skipped_recent bigint)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    r record;
BEGIN
    IF "table" IS NULL OR repair IS NULL THEN
        RAISE EXCEPTION 'table and repair must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF @extschema@.changed_in_transaction("table") THEN
        RAISE EXCEPTION 'cannot verify table % in a transaction that changed its claimed values', "table"
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The transaction''s changes are claimed at its COMMIT; the store does not hold them yet.',
                  HINT = 'Commit first, then verify.';
    END IF;
    -- one verification of a table at a time (the worker's included)
    PERFORM pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtext('claims_cell.verify'), "table"::oid::integer);
    r := @extschema@.verify_slice("table", repair, NULL, NULL);
    missing := r.missing; extra := r.extra; drifted := r.drifted;
    repaired := r.repaired; skipped_recent := r.skipped_recent;
    RETURN NEXT;
END
$$;
COMMENT ON FUNCTION @extschema@.verify(regclass, boolean) IS
    'Compare a claimed table with its claims at the store; with repair, fix the differences';
REVOKE ALL ON FUNCTION @extschema@.verify(regclass, boolean) FROM PUBLIC;
