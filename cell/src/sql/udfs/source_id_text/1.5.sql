-- A source id as the store spells it.
CREATE OR REPLACE FUNCTION @extschema@.source_id_text(source_id bytea)
RETURNS text
LANGUAGE sql IMMUTABLE STRICT
SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.translate(pg_catalog.encode(source_id, 'base64'), E'\n', '');
REVOKE ALL ON FUNCTION @extschema@.source_id_text(bytea) FROM PUBLIC;
