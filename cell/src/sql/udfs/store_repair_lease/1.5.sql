CREATE OR REPLACE FUNCTION @extschema@.store_repair_lease(server name, cell_id bigint, creates jsonb,
                                               destroys jsonb, OUT lease uuid,
                                               OUT sqlstate text, OUT message text)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_store_repair_lease'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION @extschema@.store_repair_lease(name, bigint, jsonb, jsonb) IS
    'Take one lease of repairs at the claims store, recorded locally and committed by this transaction';
REVOKE ALL ON FUNCTION @extschema@.store_repair_lease(name, bigint, jsonb, jsonb) FROM PUBLIC;
