-- The SQL expression of the source id of a row of a claimed table (alias
-- names the row), the bytes the row trigger sends: for verify().
CREATE FUNCTION @extschema@.source_id_sql("table" regclass, source_attnums smallint[], alias name)
RETURNS text
AS 'MODULE_PATHNAME', 'claims_cell_source_id_sql'
LANGUAGE C STRICT STABLE;
REVOKE ALL ON FUNCTION @extschema@.source_id_sql(regclass, smallint[], name) FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.source_id_sql(regclass, smallint[], name) IS
    'The SQL expression of the source id of a row of a claimed table';
