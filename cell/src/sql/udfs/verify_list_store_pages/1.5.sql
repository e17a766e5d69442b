-- The cell's records at the store of the claimed columns attrs (as
-- verify_slice() builds them) with source ids in (lo, hi], NULL ends open:
-- every page of claims_list_records per source type, as the store's text.
-- Pages of 250 records: the store builds a page of 1000 several times
-- slower per record (its allocations of more than 128kB are mapped and
-- unmapped by malloc on every call, each page faulted in afresh).
CREATE FUNCTION @extschema@.verify_list_store_pages(server name, cell_id bigint, attrs jsonb,
                                                    lo bytea, hi bytea)
RETURNS text[]
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    a record;
    req jsonb;
    pg record;
    gt text;
    last_gt text;
    pages text[] := '{}';
BEGIN
    FOR a IN SELECT x->>'source_type' AS source_type,
                    pg_catalog.jsonb_agg(DISTINCT x->'bucket_type') AS bucket_types
               FROM pg_catalog.jsonb_array_elements(attrs) x GROUP BY 1
    LOOP
        req := pg_catalog.jsonb_build_object('cell_id', cell_id, 'source_type', a.source_type,
                                             'bucket_types', a.bucket_types, 'limit', 250);
        IF lo IS NOT NULL THEN
            req := req || pg_catalog.jsonb_build_object('source_id_gt', @extschema@.source_id_text(lo));
        END IF;
        IF hi IS NOT NULL THEN
            req := req || pg_catalog.jsonb_build_object('source_id_lte', @extschema@.source_id_text(hi));
        END IF;
        last_gt := NULL;
        LOOP
            pg := @extschema@.store_list_records_page(server, req);
            pages := pages OPERATOR(pg_catalog.||) pg.page;
            EXIT WHEN NOT pg.truncated;
            gt := pg.last_source_id;
            IF gt IS NULL OR gt IS NOT DISTINCT FROM last_gt THEN
                RAISE EXCEPTION 'the claims store''s listing of records did not advance past source id %', gt
                    USING ERRCODE = 'protocol_violation';
            END IF;
            last_gt := gt;
            req := req || pg_catalog.jsonb_build_object('source_id_gt', gt);
        END LOOP;
    END LOOP;
    RETURN pages;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_list_store_pages(name, bigint, jsonb, bytea, bytea) FROM PUBLIC;
