-- Force-finish a stuck lease of any cell, recording the operator's reason.
CREATE OR REPLACE FUNCTION @extschema@.claims_admin_finish_lease(lease_uuid uuid, action text, reason text)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    lease_cell bigint;
    before_state text;
    after_state text;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_admin_finish_lease.lease_uuid IS NULL OR action IS NULL OR reason IS NULL THEN
        RAISE EXCEPTION 'lease_uuid, action and reason must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF action NOT IN ('commit', 'rollback') THEN
        RAISE EXCEPTION 'action must be ''commit'' or ''rollback'', not "%"', action USING ERRCODE = '22023';
    END IF;
    IF btrim(reason) = '' THEN
        RAISE EXCEPTION 'a reason is required' USING ERRCODE = '22023';
    END IF;
    SELECT l.creator_id, l.state::text INTO lease_cell, before_state
    FROM @extschema@.claim_leases l WHERE l.uuid = claims_admin_finish_lease.lease_uuid;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease % does not exist', claims_admin_finish_lease.lease_uuid USING ERRCODE = 'P0002';
    END IF;
    IF action = 'commit' THEN
        PERFORM @extschema@.claims_commit(lease_cell, claims_admin_finish_lease.lease_uuid);
    ELSE
        PERFORM @extschema@.claims_rollback(lease_cell, claims_admin_finish_lease.lease_uuid);
    END IF;
    UPDATE @extschema@.claim_leases l
    SET finished_by = @extschema@.claims_caller(), finish_reason = reason
    WHERE l.uuid = claims_admin_finish_lease.lease_uuid AND before_state = 'outstanding'
    RETURNING l.state::text INTO after_state;
    IF after_state IS NULL THEN
        after_state := before_state;
    END IF;
    PERFORM @extschema@.claims_audit('finish_lease_' || action, lease_cell,
        claims_admin_finish_lease.lease_uuid, reason,
        pg_catalog.jsonb_build_object('previous_state', before_state, 'state', after_state));
    RETURN pg_catalog.jsonb_build_object('cell_id', lease_cell::text,
        'lease_uuid', claims_admin_finish_lease.lease_uuid,
        'previous_state', before_state, 'state', after_state);
END
$$;
COMMENT ON FUNCTION @extschema@.claims_admin_finish_lease(uuid, text, text) IS
    'Force-finish a lease of any cell with a recorded reason (administrators)';
REVOKE ALL ON FUNCTION @extschema@.claims_admin_finish_lease(uuid, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_admin_finish_lease(uuid, text, text) TO claims_admin;
