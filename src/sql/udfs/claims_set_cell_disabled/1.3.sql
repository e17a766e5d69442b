-- Disabling a cell takes the cell's lock as decommissioning does: it waits
-- for the cell's claims_begin_update calls in progress, and the calls that
-- wait on it see the cell disabled, so no lease is taken past the change.
CREATE OR REPLACE FUNCTION @extschema@.claims_set_cell_disabled(cell_id bigint, disabled boolean, reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_set_cell_disabled.cell_id IS NULL OR claims_set_cell_disabled.disabled IS NULL THEN
        RAISE EXCEPTION 'cell_id and disabled must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF claims_set_cell_disabled.disabled THEN
        PERFORM @extschema@.claims_lock_cell(claims_set_cell_disabled.cell_id);
    END IF;
    UPDATE @extschema@.claim_cells c
    SET disabled = claims_set_cell_disabled.disabled, updated_at = now()
    WHERE c.cell_id = claims_set_cell_disabled.cell_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_set_cell_disabled.cell_id USING ERRCODE = 'P0002';
    END IF;
    PERFORM @extschema@.claims_audit(CASE WHEN claims_set_cell_disabled.disabled
                                          THEN 'disable_cell' ELSE 'enable_cell' END,
                                     claims_set_cell_disabled.cell_id, NULL, reason, '{}');
END
$$;
COMMENT ON FUNCTION @extschema@.claims_set_cell_disabled(bigint, boolean, text) IS
    'Disable or enable a cell; a disabled cell''s own calls are refused (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_set_cell_disabled(bigint, boolean, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_set_cell_disabled(bigint, boolean, text) TO claims_admin;
