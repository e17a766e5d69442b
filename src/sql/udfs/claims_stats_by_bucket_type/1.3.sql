-- Values per bucket type, from shared memory: values created, destroyed and
-- replaced by successful claims_begin_update calls, and values at fault in
-- refused ones by conflict (23505 permanent, 55P03 temporary; one refused
-- call may hold several). One row per type id below 256 counted since the
-- server started; the view adds the type's name.
CREATE OR REPLACE FUNCTION @extschema@.claims_stats_by_bucket_type(
    OUT bucket_type integer,
    OUT values_created bigint,
    OUT values_destroyed bigint,
    OUT values_replaced bigint,
    OUT conflicts_permanent bigint,
    OUT conflicts_temporary bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'claims_stats_by_bucket_type'
LANGUAGE C VOLATILE PARALLEL SAFE;
COMMENT ON FUNCTION @extschema@.claims_stats_by_bucket_type() IS
    'Values changed and values at fault in conflicts per bucket type since the last reset';
REVOKE ALL ON FUNCTION @extschema@.claims_stats_by_bucket_type() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_by_bucket_type() TO pg_monitor;
