-- One lease of repairs: the records of a list of fixes.
CREATE FUNCTION @extschema@.verify_repair_lease(server name, cell_id bigint, items jsonb,
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
                       'rails_primary_key_id', @extschema@.source_id_text(pg_catalog.decode(x->>'sid', 'hex')))))
                   FILTER (WHERE x->>'kind' <> 'extra'), '[]') AS creates,
               COALESCE(pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                   'bucket', pg_catalog.jsonb_build_object('type', x->>'bucket_type', 'value', x->>'value')))
                   FILTER (WHERE x->>'kind' <> 'missing'), '[]') AS destroys
          FROM pg_catalog.jsonb_array_elements(items) x) q,
       LATERAL @extschema@.store_repair_lease(server, cell_id, q.creates, q.destroys) r
$$;
