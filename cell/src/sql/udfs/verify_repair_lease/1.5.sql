-- One lease of repairs: source_id_text() written out, as a function with
-- its own search_path is never inlined and cost a call (and a search_path
-- change) per record.
CREATE OR REPLACE FUNCTION @extschema@.verify_repair_lease(server name, cell_id bigint, items jsonb,
                                                OUT lease uuid, OUT sqlstate text, OUT message text)
RETURNS record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT r.lease, r.sqlstate, r.message
  FROM (SELECT COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'bucket', pg_catalog.jsonb_build_object('type', x->>'bucket_type', 'value', x->>'value'),
                   'subject', pg_catalog.jsonb_build_object('type', x->>'subject_type', 'id', x->>'subject_id'),
                   'source', pg_catalog.jsonb_build_object('type', x->>'source_type',
                       'rails_primary_key_id', pg_catalog.translate(pg_catalog.encode(pg_catalog.decode(x->>'sid', 'hex'), 'base64'), E'\n', ''))))
                   FILTER (WHERE x->>'kind' <> 'extra'), '[]') AS creates,
               COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'bucket', pg_catalog.jsonb_build_object('type', x->>'bucket_type', 'value', x->>'value')))
                   FILTER (WHERE x->>'kind' <> 'missing'), '[]') AS destroys
          FROM pg_catalog.jsonb_array_elements(items) x) q,
       LATERAL @extschema@.store_repair_lease(server, cell_id, q.creates, q.destroys) r
$$;
REVOKE ALL ON FUNCTION @extschema@.verify_repair_lease(name, bigint, jsonb) FROM PUBLIC;
