-- claims_commit or claims_rollback at the store; sqlstate '00000' on
-- success, the store's SQLSTATE, or 08006; never raises for the store.
CREATE OR REPLACE FUNCTION @extschema@.store_finish_lease(server name, cell_id bigint, lease uuid,
                                               commit boolean,
                                               OUT sqlstate text, OUT message text)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_store_finish_lease'
LANGUAGE C STRICT VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.store_finish_lease(name, bigint, uuid, boolean) FROM PUBLIC;
