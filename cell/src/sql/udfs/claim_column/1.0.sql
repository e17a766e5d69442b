CREATE FUNCTION @extschema@.claim_column("table" regclass, "column" name, bucket_type text,
                                         subject_type text, subject_column name,
                                         source_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_claim_column'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text) IS
    'Claim the values of a column at the store from now on';
