-- Record one administrator action.
CREATE OR REPLACE FUNCTION @extschema@.claims_audit(action text, cell_id bigint, lease_uuid uuid,
                                         reason text, detail jsonb)
RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO @extschema@.claim_admin_actions
        (actor, session_role, action, cell_id, lease_uuid, reason, detail)
    VALUES (@extschema@.claims_caller(), session_user, $1, $2, $3, $4, coalesce($5, '{}'));
$$;
COMMENT ON FUNCTION @extschema@.claims_audit(text, bigint, uuid, text, jsonb) IS
    'Record one administrator action in claim_admin_actions';
REVOKE ALL ON FUNCTION @extschema@.claims_audit(text, bigint, uuid, text, jsonb) FROM PUBLIC;
