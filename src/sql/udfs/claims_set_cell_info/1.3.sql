-- Set a cell's CellInfo: address, session prefix and sequence ranges, all
-- three at once (NULL or empty clears one). A range must be non-empty and
-- overlap neither another range of the list (22023) nor a range of
-- another cell (23505). Changes of ranges are serialised by the table lock,
-- so two administrators cannot hand out overlapping ranges at once.
CREATE OR REPLACE FUNCTION @extschema@.claims_set_cell_info(cell_id bigint, address text, session_prefix text,
                                                 sequence_ranges int8range[], reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    new_address text := nullif(claims_set_cell_info.address, '');
    new_prefix text := nullif(claims_set_cell_info.session_prefix, '');
    ranges int8range[] := coalesce(claims_set_cell_info.sequence_ranges, '{}');
    n integer;
    old record;
    clash record;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_set_cell_info.cell_id IS NULL THEN
        RAISE EXCEPTION 'cell_id must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF array_ndims(ranges) > 1 THEN
        RAISE EXCEPTION 'sequence_ranges must be a one-dimensional array' USING ERRCODE = '22023';
    END IF;
    ranges := array(SELECT u.r FROM unnest(ranges) WITH ORDINALITY AS u(r, o) ORDER BY u.o);
    n := coalesce(array_length(ranges, 1), 0);
    FOR i IN 1 .. n LOOP
        IF ranges[i] IS NULL THEN
            RAISE EXCEPTION 'sequence range % is NULL', i USING ERRCODE = '22023';
        END IF;
        IF isempty(ranges[i]) THEN
            RAISE EXCEPTION 'sequence range % is empty', i USING ERRCODE = '22023',
                HINT = 'Give ranges as inclusive bounds, such as ''[1,1000000]''.';
        END IF;
        FOR j IN 1 .. i - 1 LOOP
            IF ranges[i] && ranges[j] THEN
                RAISE EXCEPTION 'sequence range % [%, %] overlaps sequence range % [%, %]',
                    i, coalesce(lower(ranges[i])::text, '-9223372036854775808'),
                    coalesce((upper(ranges[i]) - 1)::text, '9223372036854775807'),
                    j, coalesce(lower(ranges[j])::text, '-9223372036854775808'),
                    coalesce((upper(ranges[j]) - 1)::text, '9223372036854775807')
                    USING ERRCODE = '22023';
            END IF;
        END LOOP;
    END LOOP;

    LOCK TABLE @extschema@.claim_cells IN SHARE ROW EXCLUSIVE MODE;
    SELECT c.address, c.session_prefix, c.sequence_ranges INTO old
    FROM @extschema@.claim_cells c WHERE c.cell_id = claims_set_cell_info.cell_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_set_cell_info.cell_id USING ERRCODE = 'P0002';
    END IF;
    SELECT c.cell_id AS other, theirs, mine INTO clash
    FROM @extschema@.claim_cells c, unnest(c.sequence_ranges) AS theirs, unnest(ranges) AS mine
    WHERE c.cell_id <> claims_set_cell_info.cell_id AND theirs && mine
    ORDER BY c.cell_id, lower(theirs) LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'sequence range [%, %] overlaps range [%, %] of cell %',
            coalesce(lower(clash.mine)::text, '-9223372036854775808'),
            coalesce((upper(clash.mine) - 1)::text, '9223372036854775807'),
            coalesce(lower(clash.theirs)::text, '-9223372036854775808'),
            coalesce((upper(clash.theirs) - 1)::text, '9223372036854775807'),
            clash.other
            USING ERRCODE = '23505',
                  DETAIL = 'A sequence value belongs to one cell only.';
    END IF;

    UPDATE @extschema@.claim_cells c
    SET address = new_address, session_prefix = new_prefix, sequence_ranges = ranges,
        updated_at = now()
    WHERE c.cell_id = claims_set_cell_info.cell_id;
    PERFORM @extschema@.claims_audit('set_cell_info', claims_set_cell_info.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object(
            'address', new_address, 'session_prefix', new_prefix,
            'sequence_ranges', pg_catalog.to_jsonb(ranges::text[]),
            'previous', pg_catalog.jsonb_build_object(
                'address', old.address, 'session_prefix', old.session_prefix,
                'sequence_ranges', pg_catalog.to_jsonb(old.sequence_ranges::text[]))));
END
$$;
COMMENT ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text) IS
    'Set a cell''s address, session prefix and sequence ranges (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_set_cell_info(bigint, text, text, int8range[], text) TO claims_admin;
