/*
 * Repair what verify_slice() found, in leases of at most chunk_limit
 * records: a missing value is created, an extra one destroyed, a drifted
 * one replaced (the same value in both lists: the store keeps it claimed
 * by this cell throughout, never destroyed and created). A lease the
 * store refuses is retried one value at a time; a value it refuses alone
 * is reported and left. Returns the number of values repaired.
 */
CREATE OR REPLACE FUNCTION @extschema@.verify_repair(server name, cell_id bigint, "table" regclass,
                                          fixes jsonb, chunk_limit integer)
RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    k integer;
    size integer := 0;
    g integer := 0;
    grp integer[] := '{}';
    chunks jsonb[];
    items jsonb;
    n integer;
    one jsonb;
    res record;
    fixed bigint := 0;
BEGIN
    -- chunks in order, a replace (2 records) never split
    FOR k IN SELECT CASE WHEN x->>'kind' = 'drifted' THEN 2 ELSE 1 END
               FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS e(x, i) ORDER BY i
    LOOP
        IF size + k > chunk_limit THEN
            g := g + 1;
            size := 0;
        END IF;
        size := size + k;
        grp := grp || g;
    END LOOP;
    IF pg_catalog.jsonb_array_length(fixes) = 0 THEN
        RETURN 0;
    ELSIF g = 0 THEN
        -- one lease takes them all (a backfill's batch): no regrouping
        chunks := ARRAY[fixes];
    ELSE
        SELECT pg_catalog.array_agg(c.items ORDER BY c.g) INTO chunks
          FROM (SELECT grp[e.i::integer] AS g, pg_catalog.jsonb_agg(e.x ORDER BY e.i) AS items
                  FROM pg_catalog.jsonb_array_elements(fixes) WITH ORDINALITY AS e(x, i)
                 GROUP BY 1) c;
    END IF;
    FOREACH items IN ARRAY chunks
    LOOP
        n := pg_catalog.jsonb_array_length(items);
        res := @extschema@.verify_repair_lease(server, cell_id, items);
        IF res.sqlstate = '00000' THEN
            fixed := fixed + n;
            CONTINUE;
        END IF;
        IF res.sqlstate NOT IN ('23505', '55P03', 'P0002', '42501', '22023', '22001', '22P02') THEN
            RAISE EXCEPTION 'the claims store refused the repairs of table %: %', "table", res.message
                USING ERRCODE = res.sqlstate;
        END IF;
        -- one value per lease: the others go through
        FOR one IN SELECT x FROM pg_catalog.jsonb_array_elements(items) x LOOP
            IF n > 1 THEN
                res := @extschema@.verify_repair_lease(server, cell_id, pg_catalog.jsonb_build_array(one));
            END IF;
            IF res.sqlstate = '00000' THEN
                fixed := fixed + 1;
            ELSE
                RAISE WARNING 'claims_cell: could not repair the % value %=% of table %: %',
                    one->>'kind', one->>'bucket_type', one->>'value', "table", res.message
                    USING DETAIL = pg_catalog.format('SQLSTATE %s; row %s.', res.sqlstate,
                                                     COALESCE(one->>'pk', '(none)'));
            END IF;
        END LOOP;
    END LOOP;
    RETURN fixed;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_repair(name, bigint, regclass, jsonb, integer) FROM PUBLIC;
