-- The primary key columns' values (as text, in key order) a source id
-- holds; NULL when it is no source id of that key. verify() walks a table
-- of a primary key of several columns in ranges of ROW(key columns).
CREATE FUNCTION @extschema@.source_key_values(source_id bytea, "table" regclass, source_attnums smallint[])
RETURNS text[]
AS 'MODULE_PATHNAME', 'claims_cell_source_key_values'
LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION @extschema@.source_key_values(bytea, regclass, smallint[]) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.source_key_values(bytea, regclass, smallint[]) IS
    'The primary key values a source id of a claimed table holds';
