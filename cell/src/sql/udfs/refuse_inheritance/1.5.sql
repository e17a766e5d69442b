-- ---------------------------------------------------------------------------
-- A claimed table never gets inheritance children: a child's rows are rows
-- of its parent (SELECT FROM parent shows them), and the parent's claim
-- triggers do not fire for them. CREATE TABLE ... INHERITS and ALTER TABLE
-- ... INHERIT of a claimed table fail; claim_column refuses a table that
-- has children. Partitions are refused with their parent in claim_column.
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.refuse_inheritance()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    bad record;
BEGIN
    -- DROP EXTENSION or a half-made one: nothing to protect
    IF pg_catalog.to_regclass('@extschema@.claimed_attributes') IS NULL THEN
        RETURN;
    END IF;
    SELECT ch.relname AS child, pa.relname AS parent
      INTO bad
      FROM pg_catalog.pg_inherits i
      JOIN pg_catalog.pg_class ch ON ch.oid OPERATOR(pg_catalog.=) i.inhrelid
      JOIN pg_catalog.pg_class pa ON pa.oid OPERATOR(pg_catalog.=) i.inhparent
     WHERE i.inhparent IN (SELECT c.table_name FROM @extschema@.claimed_attributes c)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'table "%" cannot inherit from table "%", which has claimed columns', bad.child, bad.parent
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'Rows of an inheritance child are rows of its parent, but the parent''s claims are not taken for them.',
                  HINT = 'Give the new table columns of its own and claim them, or unclaim the parent''s columns first.';
    END IF;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.refuse_inheritance() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.refuse_inheritance() IS
    'Event trigger: refuse inheritance children of a table with claimed columns';
