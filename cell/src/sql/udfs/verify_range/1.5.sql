CREATE OR REPLACE FUNCTION @extschema@.verify_range(key_expr text, key_type regtype, enc text, lo bytea, hi bytea)
RETURNS text
LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lo_int bigint;
    hi_int bigint;
    lo_lit text;
    hi_lit text;
BEGIN
    IF key_type IN ('int2'::regtype, 'int4'::regtype, 'int8'::regtype) THEN
        lo_int := ('x' || pg_catalog.encode(lo, 'hex'))::bit(64)::bigint;
        hi_int := ('x' || pg_catalog.encode(hi, 'hex'))::bit(64)::bigint;
        RETURN CASE WHEN lo IS NULL THEN 'true'
                    WHEN lo_int >= 0 THEN pg_catalog.format('(%1$s < 0 OR %1$s > %2$s)', key_expr, lo_int)
                    ELSE pg_catalog.format('(%1$s < 0 AND %1$s > %2$s)', key_expr, lo_int) END
               || ' AND ' ||
               CASE WHEN hi IS NULL THEN 'true'
                    WHEN hi_int >= 0 THEN pg_catalog.format('(%1$s >= 0 AND %1$s <= %2$s)', key_expr, hi_int)
                    ELSE pg_catalog.format('(%1$s >= 0 OR %1$s <= %2$s)', key_expr, hi_int) END;
    END IF;
    IF key_type = 'uuid'::regtype THEN
        lo_lit := pg_catalog.quote_literal(pg_catalog.encode(lo, 'hex')) || '::pg_catalog.uuid';
        hi_lit := pg_catalog.quote_literal(pg_catalog.encode(hi, 'hex')) || '::pg_catalog.uuid';
    ELSE
        lo_lit := pg_catalog.quote_literal(pg_catalog.convert_from(lo, enc));
        hi_lit := pg_catalog.quote_literal(pg_catalog.convert_from(hi, enc));
    END IF;
    RETURN COALESCE(key_expr || ' > ' || lo_lit, 'true') || ' AND ' || COALESCE(key_expr || ' <= ' || hi_lit, 'true');
END
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_range(text, regtype, text, bytea, bytea) FROM PUBLIC;
