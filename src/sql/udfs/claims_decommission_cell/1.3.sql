-- Decommission a cell: release all of its claims so the values are free
-- again, and disable it. Refuses while the cell has outstanding leases
-- unless forced, in which case they are rolled back first.
CREATE OR REPLACE FUNCTION @extschema@.claims_decommission_cell(cell_id bigint, reason text, force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    outstanding bigint;
    rolled_back bigint := 0;
    released bigint;
    lease record;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_decommission_cell.cell_id IS NULL OR reason IS NULL OR force IS NULL THEN
        RAISE EXCEPTION 'cell_id, reason and force must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF btrim(reason) = '' THEN
        RAISE EXCEPTION 'a reason is required' USING ERRCODE = '22023';
    END IF;
    -- wait for the cell's begin_updates in progress; hold off new ones
    PERFORM @extschema@.claims_lock_cell(claims_decommission_cell.cell_id);
    UPDATE @extschema@.claim_cells c SET disabled = true, updated_at = now()
    WHERE c.cell_id = claims_decommission_cell.cell_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_decommission_cell.cell_id USING ERRCODE = 'P0002';
    END IF;

    SELECT count(*) INTO outstanding FROM @extschema@.claim_leases l
    WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding';
    IF outstanding > 0 AND NOT force THEN
        RAISE EXCEPTION 'cell % has % outstanding leases', claims_decommission_cell.cell_id, outstanding
            USING ERRCODE = '55000',
                  HINT = 'Let the cell finish them, or pass force => true to roll them back.';
    END IF;
    FOR lease IN
        SELECT l.uuid FROM @extschema@.claim_leases l
        WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding'
        ORDER BY l.created_at, l.uuid
    LOOP
        PERFORM @extschema@.claims_rollback(claims_decommission_cell.cell_id, lease.uuid);
        UPDATE @extschema@.claim_leases l
        SET finished_by = @extschema@.claims_caller(), finish_reason = reason
        WHERE l.uuid = lease.uuid;
        rolled_back := rolled_back + 1;
    END LOOP;

    WITH locked AS (
        SELECT c.uuid FROM @extschema@.claims c
        WHERE c.creator_id = claims_decommission_cell.cell_id AND c.lease_uuid IS NULL
        ORDER BY c.bucket_type, c.bucket_digest
        FOR UPDATE
    )
    DELETE FROM @extschema@.claims c USING locked WHERE c.uuid = locked.uuid;
    GET DIAGNOSTICS released = ROW_COUNT;

    IF EXISTS (SELECT 1 FROM @extschema@.claim_leases l
               WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding') THEN
        RAISE EXCEPTION 'cell % took new leases while it was being decommissioned', claims_decommission_cell.cell_id
            USING ERRCODE = '55000',
                  HINT = 'Disable the cell with claims_set_cell_disabled() first, then decommission it.';
    END IF;

    PERFORM @extschema@.claims_audit('decommission_cell', claims_decommission_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('claims_released', released, 'leases_rolled_back', rolled_back,
                                      'force', force));
    RETURN pg_catalog.jsonb_build_object('cell_id', claims_decommission_cell.cell_id::text,
        'claims_released', released, 'leases_rolled_back', rolled_back, 'disabled', true);
END
$$;
COMMENT ON FUNCTION @extschema@.claims_decommission_cell(bigint, text, boolean) IS
    'Release all claims of a cell and disable it (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_decommission_cell(bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_decommission_cell(bigint, text, boolean) TO claims_admin;
