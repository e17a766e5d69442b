CREATE OR REPLACE FUNCTION @extschema@.verify_list_store(server name, cell_id bigint, attrs jsonb, lo bytea, hi bytea)
RETURNS jsonb
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a record;
    req jsonb;
    page jsonb;
    gt text;
    last_gt text;
    stored jsonb := '[]';
BEGIN
    FOR a IN SELECT x->>'source_type' AS source_type,
                    pg_catalog.jsonb_agg(DISTINCT x->'bucket_type') AS bucket_types
               FROM pg_catalog.jsonb_array_elements(attrs) x GROUP BY 1
    LOOP
        req := pg_catalog.jsonb_build_object('cell_id', cell_id, 'source_type', a.source_type,
                                             'bucket_types', a.bucket_types, 'limit', 1000);
        IF lo IS NOT NULL THEN
            req := req || pg_catalog.jsonb_build_object('source_id_gt', @extschema@.source_id_text(lo));
        END IF;
        IF hi IS NOT NULL THEN
            req := req || pg_catalog.jsonb_build_object('source_id_lte', @extschema@.source_id_text(hi));
        END IF;
        last_gt := NULL;
        LOOP
            page := @extschema@.store_list_records(server, req);
            stored := stored || COALESCE(page->'records', '[]');
            EXIT WHEN NOT COALESCE((page->>'truncated')::boolean, false);
            gt := page->'records'->-1->'metadata'->'source'->>'rails_primary_key_id';
            IF gt IS NULL OR gt IS NOT DISTINCT FROM last_gt THEN
                RAISE EXCEPTION 'the claims store''s listing of records did not advance past source id %', gt
                    USING ERRCODE = 'protocol_violation';
            END IF;
            last_gt := gt;
            req := req || pg_catalog.jsonb_build_object('source_id_gt', gt);
        END LOOP;
    END LOOP;
    RETURN stored;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_list_store(name, bigint, jsonb, bytea, bytea) FROM PUBLIC;
