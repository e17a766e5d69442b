--
-- Caches and saved statements when calls come from unusual places: a
-- parallel query, an API call made from inside another call's statement (a
-- trigger an operator put on a store table), a look-alike index named like
-- the key index, and queries planned while a store statement runs.
--
\set VERBOSITY terse
\set SHOW_CONTEXT never

-- 1. A parallel query calling the read functions in the leader. The first
-- call of a new connection loads the registries while the query is in
-- parallel mode, where no new snapshot can be taken.
CREATE TABLE reentry_rows AS SELECT g FROM generate_series(1, 20000) g;
ANALYZE reentry_rows;
\c -
SET parallel_setup_cost = 0;
SET parallel_tuple_cost = 0;
SET min_parallel_table_scan_size = 0;
SET max_parallel_workers_per_gather = 2;
EXPLAIN (COSTS OFF)
SELECT count(*), claims_get_record('{"claim": {"username": "reentry-nobody"}}')
FROM reentry_rows;
SELECT count(*), claims_get_record('{"claim": {"username": "reentry-nobody"}}') IS NULL AS unclaimed
FROM reentry_rows;
SELECT count(*), claims_list_leases('{"cell_id": 1}') ? 'leases' AS listed
FROM reentry_rows;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
RESET max_parallel_workers_per_gather;
DROP TABLE reentry_rows;

-- The rest runs in a database of its own, the extension in schema s3.
CREATE DATABASE regress_reentry;
\c regress_reentry
SET client_min_messages = warning;
CREATE SCHEMA s3;
CREATE EXTENSION claims SCHEMA s3;
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'regress_cells') THEN
    CREATE ROLE regress_cells NOLOGIN;
  END IF;
END $$;
SELECT s3.claims_register_cell(1, 'cell-1', 'regress_cells') IS NOT NULL AS registered;
RESET client_min_messages;

-- 2. A query a trigger plans while a store statement runs is planned from
-- the table's own statistics, not as the store's statements are (as for a
-- million rows): the estimate inside equals the estimate outside.
CREATE TABLE public.reentry_estimates (place text, plan_rows numeric);
CREATE FUNCTION public.reentry_estimate() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) SELECT * FROM s3.claims WHERE creator_id = 1 AND bucket_type = 1' INTO plan;
  INSERT INTO public.reentry_estimates VALUES ('inside', (plan->0->'Plan'->>'Plan Rows')::numeric);
  RETURN NULL;
END $$;
CREATE TRIGGER reentry_estimate AFTER INSERT ON s3.claims
  FOR EACH STATEMENT EXECUTE FUNCTION public.reentry_estimate();
DO $$
DECLARE
  plan json;
BEGIN
  EXECUTE 'EXPLAIN (FORMAT JSON) SELECT * FROM s3.claims WHERE creator_id = 1 AND bucket_type = 1' INTO plan;
  INSERT INTO public.reentry_estimates VALUES ('outside', (plan->0->'Plan'->>'Plan Rows')::numeric);
END $$;
SELECT s3.claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "ida"}, "subject": {"type": "USER", "id": 50}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 50}}]}') ? 'lease_uuid' AS leased;
SELECT count(DISTINCT plan_rows) = 1 AS same_estimate, count(*) AS estimates FROM public.reentry_estimates;
DROP TRIGGER reentry_estimate ON s3.claims;

-- 3. An index an operator names claims_bucket_key that is not the key
-- index (other columns, or in another order) is never probed as if it were.
ALTER INDEX s3.claims_bucket_key RENAME TO claims_bucket_key_orig;
CREATE INDEX claims_bucket_key ON s3.claims (bucket_digest, bucket_type);
SELECT s3.claims_get_record('{"claim": {"username": "ida"}}')->'record'->>'status' AS status;
DROP INDEX s3.claims_bucket_key;
CREATE INDEX claims_bucket_key ON s3.claims (bucket_digest);
SELECT s3.claims_get_record('{"claim": {"username": "ida"}}')->'record'->>'status' AS status;
ALTER INDEX s3.claims_bucket_key RENAME TO other_idx;
SELECT s3.claims_get_record('{"claim": {"username": "ida"}}')->'record'->>'status' AS status;
DROP INDEX s3.other_idx;
ALTER INDEX s3.claims_bucket_key_orig RENAME TO claims_bucket_key;
SELECT s3.claims_get_record('{"claim": {"username": "ida"}}')->'record'->>'status' AS status;

-- 4. A trigger on the store's claims table renames the extension's schema
-- and calls the API again while the outer claims_begin_update is running
-- its statement: the nested calls prepare their statements under the new
-- name, and the outer statement's plan stays alive until it is done.
CREATE FUNCTION public.reentry_nested() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  n text;
  m text;
  r jsonb;
BEGIN
  SELECT nspname INTO n FROM pg_catalog.pg_namespace
  WHERE oid = (SELECT relnamespace FROM pg_catalog.pg_class WHERE oid = TG_RELID);
  m := n || 'x';
  EXECUTE pg_catalog.format('ALTER SCHEMA %I RENAME TO %I', n, m);
  EXECUTE pg_catalog.format('SELECT %I.claims_list_leases(%L)', m, '{"cell_id": 1}') INTO r;
  EXECUTE pg_catalog.format('SELECT %I.claims_list_records(%L)', m,
                            '{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}') INTO r;
  RAISE NOTICE 'nested calls in schema %: % records listed', m, pg_catalog.jsonb_array_length(r->'records');
  RETURN NULL;
END $$;
CREATE TRIGGER reentry_nested AFTER INSERT ON s3.claims
  FOR EACH STATEMENT EXECUTE FUNCTION public.reentry_nested();
SELECT s3.claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "hank"}, "subject": {"type": "USER", "id": 49}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 49}}]}') ? 'lease_uuid' AS leased;
DROP TRIGGER reentry_nested ON s3x.claims;
SELECT nspname FROM pg_namespace WHERE nspname LIKE 's3%' ORDER BY 1;
ALTER SCHEMA s3x RENAME TO s3;
-- the same connection keeps working under the old name again
SELECT s3.claims_get_record('{"claim": {"username": "hank"}}')->'record'->>'status' AS status;

\c contrib_regression
DROP DATABASE regress_reentry;
