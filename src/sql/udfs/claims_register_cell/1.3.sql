-- Register a cell with the role it connects as.
CREATE OR REPLACE FUNCTION @extschema@.claims_register_cell(cell_id bigint, cell_name text, role_name text,
                                                 reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_register_cell.cell_id IS NULL OR cell_name IS NULL OR claims_register_cell.role_name IS NULL THEN
        RAISE EXCEPTION 'cell_id, cell_name and role_name must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF claims_register_cell.cell_id <= 0 THEN
        RAISE EXCEPTION 'cell_id must be greater than 0, not %', claims_register_cell.cell_id
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = claims_register_cell.role_name) THEN
        RAISE EXCEPTION 'role "%" does not exist', claims_register_cell.role_name
            USING ERRCODE = '42704';
    END IF;
    INSERT INTO @extschema@.claim_cells (cell_id, name, role_name)
    VALUES (claims_register_cell.cell_id, cell_name, claims_register_cell.role_name);
    EXECUTE pg_catalog.format('GRANT claims_cell TO %I', claims_register_cell.role_name);
    PERFORM @extschema@.claims_audit('register_cell', claims_register_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('name', cell_name, 'role', claims_register_cell.role_name));
END
$$;
COMMENT ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text) IS
    'Register a cell with the role it connects as (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text) TO claims_admin;
