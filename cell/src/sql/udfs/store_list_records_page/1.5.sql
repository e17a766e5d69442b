-- One page of claims_list_records as the text the store sent, whether it
-- is truncated and its last record's source id: verify() reads the
-- records' fields from the text without building jsonb of them.
CREATE FUNCTION @extschema@.store_list_records_page(server name, request jsonb,
                                                    OUT page text, OUT truncated boolean,
                                                    OUT last_source_id text)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_store_list_records_page'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION @extschema@.store_list_records_page(name, jsonb) IS
    'One page of claims_list_records at the claims store, as text';
REVOKE ALL ON FUNCTION @extschema@.store_list_records_page(name, jsonb) FROM PUBLIC;
