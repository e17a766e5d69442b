--
-- The extension in a schema of its own: every statement inside is
-- schema-qualified and runs with a pinned search_path, so neither the
-- caller's search_path nor look-alike objects elsewhere change anything,
-- and cached plans and registries follow a re-created extension within one
-- session. (Runs last: it drops the extension and its data.)
--
\set SHOW_CONTEXT never

-- Use the extension in this session first, so its plans and registries are
-- cached, then drop it and create it in schema claims_s.
SELECT claims_get_record('{"claim": {"username": "alice"}}') #>> '{record,cell_id}' AS before_drop;
DROP EXTENSION claims;
CREATE SCHEMA claims_s;
CREATE EXTENSION claims SCHEMA claims_s;
SELECT n.nspname AS schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'claims';

-- The test helpers now look at the tables in claims_s.
CREATE OR REPLACE FUNCTION claims_state() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT md5(coalesce((SELECT string_agg(c::text, '|' ORDER BY c.uuid) FROM claims_s.claims c), '')
               || '#' ||
               coalesce((SELECT string_agg(l::text, '|' ORDER BY l.uuid) FROM claims_s.claim_leases l), ''))
$$;
CREATE OR REPLACE FUNCTION claims_rows() RETURNS bigint[]
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT ARRAY[(SELECT count(*) FROM claims_s.claims), (SELECT count(*) FROM claims_s.claim_leases)]
$$;

-- The registered cells went with the dropped extension: until they are
-- registered again, their calls are refused.
SELECT expect_error($$SELECT claims_s.claims_list_leases('{"cell_id": 1101}')$$);
SET client_min_messages = warning;
SELECT count(claims_s.claims_register_cell(id, 'cell-' || id, 'regress_cells')) AS registered
FROM generate_series(1101, 1102) AS id;
RESET client_min_messages;

-- It cannot be moved once created.
SELECT expect_error($$ALTER EXTENSION claims SET SCHEMA public$$);

-- Look-alike objects in public, first on the caller's search_path.
CREATE TABLE public.claims (uuid uuid, bucket_type int, bucket_value text);
CREATE TABLE public.claim_leases (uuid uuid);
CREATE TABLE public.claim_bucket_types (type_id int, name text);
INSERT INTO public.claim_bucket_types VALUES (99, 'DECOYS');
SET search_path = public;

SELECT claims_s.claims_get_record('{"claim": {"username": "alice"}}') IS NULL AS data_gone;
SELECT claims_s.claims_begin_update('{"cell_id": 1101, "create_records": [{"claim": {"username": "alice"},
    "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}') ->> 'lease_uuid' AS l \gset
SELECT claims_s.claims_commit(1101, :'l');
SELECT claims_s.claims_get_record('{"claim": {"username": "alice"}}') #> '{record,metadata,bucket}' AS bucket,
       claims_s.claims_get_record('{"claim": {"username": "alice"}}') #>> '{record,status}' AS status;
SELECT expect_error($$SELECT claims_s.claims_get_record('{"bucket": {"type": "DECOYS", "value": "x"}}')$$);
SELECT jsonb_array_length(claims_s.claims_list_leases('{"cell_id": 1101}') -> 'leases') AS outstanding,
       jsonb_array_length(claims_s.claims_list_records('{"cell_id": 1101, "source_type": 1}') -> 'records') AS records;
SELECT count(*) AS decoy_claims, (SELECT count(*) FROM public.claim_leases) AS decoy_leases FROM public.claims;
SELECT count(*) AS real_claims, (SELECT count(*) FROM claims_s.claim_leases) AS real_leases FROM claims_s.claims;

-- The registry of the new schema takes operator changes as before.
INSERT INTO claims_s.claim_bucket_types (type_id, name, claim_field) VALUES (19, 'WIKI_SLUGS', 'wiki_slug');
SELECT claims_s.claims_get_record('{"claim": {"wiki_slug": "home"}}') IS NULL AS unclaimed_but_known;
SELECT expect_error($$SELECT claims_s.claims_begin_update('{"cell_id": 1101, "destroy_records": [{"claim": {"wiki_slug": "home"}}]}')$$);

-- Errors and conflicts behave the same there.
SELECT expect_error($$SELECT claims_s.claims_begin_update('{"cell_id": 1102, "create_records": [{"claim": {"username": "alice"},
    "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$$);
SELECT expect_error($$SELECT claims_s.claims_commit(1101, '00000000-0000-7000-8000-000000000000')$$);

RESET search_path;
DROP TABLE public.claims, public.claim_leases, public.claim_bucket_types;
