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
