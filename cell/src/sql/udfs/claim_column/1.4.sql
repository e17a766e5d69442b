CREATE FUNCTION @extschema@.claim_column("table" regclass, "column" name, bucket_type text,
                                         subject_type text, subject_column name,
                                         source_type text DEFAULT NULL,
                                         "deferrable" boolean DEFAULT false,
                                         initially_deferred boolean DEFAULT false)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_claim_column'
LANGUAGE C VOLATILE
SET search_path = pg_catalog, pg_temp;
COMMENT ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text, boolean, boolean) IS
    'Claim the values of a column at the store from now on, at the end of each statement or (deferred) at COMMIT';
REVOKE ALL ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text, boolean, boolean) FROM PUBLIC;
