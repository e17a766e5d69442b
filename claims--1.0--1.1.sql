/* claims--1.0--1.1.sql: built-in registry rows become read-only; disabling a
 * cell waits for its begin_updates in progress. */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.1'" to load this file. \quit

-- pg_dump keeps only the registry rows an operator added (WHERE NOT
-- builtin), and CREATE EXTENSION recreates the built-in rows as shipped, so
-- a change to a built-in row would be silently lost by a dump and restore.
-- Such changes are refused instead: adding a row with builtin = true,
-- changing or deleting a built-in row, making a row built-in, and TRUNCATE
-- (which would delete the built-in rows). TG_ARGV[0] names the kind of type
-- the table registers. (An update script that must change built-in rows
-- disables these triggers around the change.)
CREATE FUNCTION @extschema@.claims_builtin_types_guard()
RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    kind text := TG_ARGV[0];
    why text := 'Built-in types come with the extension: pg_dump leaves them out and '
                'CREATE EXTENSION recreates them as shipped, so a change to them would be '
                'lost by a dump and restore.';
    instead text := pg_catalog.format('Add a new %s, or an alias to one that is not built-in, instead.', kind);
BEGIN
    IF TG_OP = 'TRUNCATE' THEN
        RAISE EXCEPTION 'permission denied to truncate %', TG_TABLE_NAME
            USING ERRCODE = '42501',
                  DETAIL = pg_catalog.format('%s holds built-in %ss, which cannot be deleted. %s',
                                             TG_TABLE_NAME, kind, why),
                  HINT = pg_catalog.format('Delete the %ss that are not built-in with DELETE instead.', kind);
    ELSIF TG_OP = 'INSERT' AND NEW.builtin THEN
        RAISE EXCEPTION 'permission denied to add built-in % "%" to %', kind, NEW.name, TG_TABLE_NAME
            USING ERRCODE = '42501', DETAIL = why,
                  HINT = 'Insert it with builtin = false (the default).';
    ELSIF TG_OP = 'UPDATE' AND OLD.builtin THEN
        RAISE EXCEPTION 'permission denied to change built-in % "%" in %', kind, OLD.name, TG_TABLE_NAME
            USING ERRCODE = '42501', DETAIL = why, HINT = instead;
    ELSIF TG_OP = 'UPDATE' AND NEW.builtin THEN
        RAISE EXCEPTION 'permission denied to make % "%" in % built-in', kind, OLD.name, TG_TABLE_NAME
            USING ERRCODE = '42501', DETAIL = why,
                  HINT = 'Only the rows the extension installs are built-in.';
    ELSIF TG_OP = 'DELETE' AND OLD.builtin THEN
        RAISE EXCEPTION 'permission denied to delete built-in % "%" from %', kind, OLD.name, TG_TABLE_NAME
            USING ERRCODE = '42501', DETAIL = why, HINT = instead;
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;

COMMENT ON FUNCTION @extschema@.claims_builtin_types_guard() IS
    'Refuse changes to built-in registry rows, which pg_dump does not keep';
REVOKE ALL ON FUNCTION @extschema@.claims_builtin_types_guard() FROM PUBLIC;

CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_bucket_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('bucket type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_bucket_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('bucket type');
CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_subject_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('subject type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_subject_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('subject type');
CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_source_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('source type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_source_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('source type');

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
