-- One batch's comparison of verify_slice(): the entries the rows should
-- hold (the first eight arrays, element by element) against the store's
-- records in the two listings (stored, stored2: pages of
-- verify_list_store_pages). Each entry or record is
-- recent (skipped), a duplicate, moved, missing, extra, drifted or ok, as
-- the SQL comparison of 1.4 classified it; fixes lists the missing, extra
-- and drifted ones in (bucket type, value) order.
CREATE FUNCTION @extschema@.verify_compare(sids text[], pks text[], bucket_types text[], "values" text[],
                                           subject_types text[], subject_ids bigint[], source_types text[],
                                           cols text[], stored text[], stored2 text[],
                                           recent_sids text[], moved text[], cutoff timestamptz,
                                           OUT n_duplicate bigint, OUT n_fixes bigint,
                                           OUT n_recent bigint, OUT duplicates text, OUT fixes jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_verify_compare'
LANGUAGE C VOLATILE;
REVOKE ALL ON FUNCTION @extschema@.verify_compare(text[], text[], text[], text[], text[], bigint[], text[], text[],
                                                  text[], text[], text[], text[], timestamptz) FROM PUBLIC;
