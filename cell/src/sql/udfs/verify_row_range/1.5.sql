-- verify(): the condition of the rows of a table whose source ids of
-- several columns are in (lo, hi] (NULL: open), as ROW(key_cols) bounds
-- that an index on the primary key serves. A bound that is no source id
-- of this key (progress kept from an earlier primary key) is open.
CREATE FUNCTION @extschema@.verify_row_range("table" regclass, source_attnums smallint[], key_cols text,
                                             lo bytea, hi bytea)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    types text[];
    lo_row text;
    hi_row text;
BEGIN
    SELECT pg_catalog.array_agg(CASE WHEN a.atttypid IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN 'pg_catalog.int8'
                                     WHEN a.atttypid = 'uuid'::regtype THEN 'pg_catalog.uuid'
                                     ELSE 'pg_catalog.text COLLATE "C"' END ORDER BY u.i)
      INTO types
      FROM pg_catalog.unnest(source_attnums) WITH ORDINALITY AS u(attnum, i)
      JOIN pg_catalog.pg_attribute a ON a.attrelid = "table" AND a.attnum = u.attnum;
    SELECT pg_catalog.string_agg(pg_catalog.format('%L::%s', v.val, types[v.i]), ', ' ORDER BY v.i) INTO lo_row
      FROM pg_catalog.unnest(@extschema@.source_key_values(lo, "table", source_attnums)) WITH ORDINALITY AS v(val, i);
    SELECT pg_catalog.string_agg(pg_catalog.format('%L::%s', v.val, types[v.i]), ', ' ORDER BY v.i) INTO hi_row
      FROM pg_catalog.unnest(@extschema@.source_key_values(hi, "table", source_attnums)) WITH ORDINALITY AS v(val, i);
    RETURN CASE WHEN lo_row IS NULL THEN 'true' ELSE pg_catalog.format('ROW(%s) > ROW(%s)', key_cols, lo_row) END
           || ' AND ' ||
           CASE WHEN hi_row IS NULL THEN 'true' ELSE pg_catalog.format('ROW(%s) <= ROW(%s)', key_cols, hi_row) END;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_row_range(regclass, smallint[], text, bytea, bytea) FROM PUBLIC;
