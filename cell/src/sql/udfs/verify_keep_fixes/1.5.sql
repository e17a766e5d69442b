-- The fixes of one batch still due after the rows of the differences were
-- read again (the parallel arrays, as verify_compare() takes them, and the
-- recent source ids of that read): an extra fix stays; any other stays
-- only when a row read again, not recent, still holds its source id, value
-- and subject. skipped counts the others; the order is kept.
CREATE FUNCTION @extschema@.verify_keep_fixes(fixes jsonb, sids text[], bucket_types text[],
                                              "values" text[], subject_ids bigint[], recent_sids text[],
                                              OUT fixes jsonb, OUT skipped integer)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_verify_keep_fixes'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.verify_keep_fixes(jsonb, text[], text[], text[], bigint[], text[]) FROM PUBLIC;
