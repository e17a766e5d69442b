-- Rename a cell.
CREATE OR REPLACE FUNCTION @extschema@.claims_rename_cell(cell_id bigint, new_name text, reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old_name text;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_rename_cell.cell_id IS NULL OR new_name IS NULL THEN
        RAISE EXCEPTION 'cell_id and new_name must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT c.name INTO old_name FROM @extschema@.claim_cells c
    WHERE c.cell_id = claims_rename_cell.cell_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_rename_cell.cell_id USING ERRCODE = 'P0002';
    END IF;
    UPDATE @extschema@.claim_cells c SET name = new_name, updated_at = now()
    WHERE c.cell_id = claims_rename_cell.cell_id;
    PERFORM @extschema@.claims_audit('rename_cell', claims_rename_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('old_name', old_name, 'new_name', new_name));
END
$$;
COMMENT ON FUNCTION @extschema@.claims_rename_cell(bigint, text, text) IS
    'Rename a registered cell (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_rename_cell(bigint, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_rename_cell(bigint, text, text) TO claims_admin;
