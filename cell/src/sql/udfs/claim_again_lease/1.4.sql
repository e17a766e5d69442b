-- One lease of claim_again(): items are {"create": record} or {"destroy":
-- record}; state '00000' with the lease taken in the calling
-- transaction, else the store's refusal or why it could not be reached.
CREATE FUNCTION @extschema@.claim_again_lease(server name, cell_id bigint, items jsonb,
                                              OUT state text, OUT message text,
                                              OUT creates integer, OUT destroys integer)
RETURNS record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    c jsonb := COALESCE((SELECT pg_catalog.jsonb_agg(e->'create') FROM pg_catalog.jsonb_array_elements(items) e
                          WHERE e ? 'create'), '[]'::jsonb);
    d jsonb := COALESCE((SELECT pg_catalog.jsonb_agg(e->'destroy') FROM pg_catalog.jsonb_array_elements(items) e
                          WHERE e ? 'destroy'), '[]'::jsonb);
BEGIN
    creates := pg_catalog.jsonb_array_length(c);
    destroys := pg_catalog.jsonb_array_length(d);
    BEGIN
        SELECT x.sqlstate, x.message INTO state, message
          FROM @extschema@.store_repair_lease(server, cell_id, c, d) x;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
    END;
END
$$;
REVOKE ALL ON FUNCTION @extschema@.claim_again_lease(name, bigint, jsonb) FROM PUBLIC;
