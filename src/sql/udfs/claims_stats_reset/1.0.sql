CREATE FUNCTION @extschema@.claims_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_stats_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;
