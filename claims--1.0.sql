/* claims--1.0.sql: tables, registries and functions of the claims store. */

\echo Use "CREATE EXTENSION claims" to load this file. \quit

-- Status of a claimed value (Record.Status of claims.v1, without UNSPECIFIED).
CREATE TYPE @extschema@.claim_status AS ENUM ('ACTIVE', 'LEASE_CREATING', 'LEASE_DESTROYING');

-- Life of a lease: outstanding until its cell commits or rolls it back.
CREATE TYPE @extschema@.claim_lease_state AS ENUM ('outstanding', 'committed', 'rolled_back');

-- Registries of the claims.v1 enums. An operator adds a type with an INSERT.
-- Number 0 (UNSPECIFIED) is never valid and never registered.
CREATE TABLE @extschema@.claim_bucket_types (
    type_id        integer PRIMARY KEY CHECK (type_id > 0),
    name           text NOT NULL UNIQUE CHECK (name ~ '^[A-Z][A-Z0-9_]*$' AND name <> 'UNSPECIFIED'),
    claim_field    text UNIQUE CHECK (claim_field ~ '^[a-z][a-z0-9_]*$'),
    integer_valued boolean NOT NULL DEFAULT false,
    aliases        text[] NOT NULL DEFAULT '{}'
                   CHECK (pg_catalog.array_to_string(aliases, ' ') ~ '^([A-Z][A-Z0-9_]*( |$))*$'
                          AND NOT 'UNSPECIFIED' = ANY (aliases)),
    builtin        boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE @extschema@.claim_bucket_types IS
    'Kinds of globally unique values (Bucket.Type); claim_field names the types.v1.Claim field';

CREATE TABLE @extschema@.claim_subject_types (
    type_id  integer PRIMARY KEY CHECK (type_id > 0),
    name     text NOT NULL UNIQUE CHECK (name ~ '^[A-Z][A-Z0-9_]*$' AND name <> 'UNSPECIFIED'),
    aliases  text[] NOT NULL DEFAULT '{}'
             CHECK (pg_catalog.array_to_string(aliases, ' ') ~ '^([A-Z][A-Z0-9_]*( |$))*$'
                    AND NOT 'UNSPECIFIED' = ANY (aliases)),
    builtin  boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE @extschema@.claim_subject_types IS 'Kinds of owning subjects (Subject.Type)';

CREATE TABLE @extschema@.claim_source_types (
    type_id  integer PRIMARY KEY CHECK (type_id > 0),
    name     text NOT NULL UNIQUE CHECK (name ~ '^[A-Z][A-Z0-9_]*$' AND name <> 'UNSPECIFIED'),
    aliases  text[] NOT NULL DEFAULT '{}'
             CHECK (pg_catalog.array_to_string(aliases, ' ') ~ '^([A-Z][A-Z0-9_]*( |$))*$'
                    AND NOT 'UNSPECIFIED' = ANY (aliases)),
    builtin  boolean NOT NULL DEFAULT false
);
COMMENT ON TABLE @extschema@.claim_source_types IS 'Kinds of source tables (Source.Type)';

INSERT INTO @extschema@.claim_bucket_types (type_id, name, claim_field, integer_valued, builtin) VALUES
    (1, 'ROUTES', 'route', false, true),
    (2, 'ORGANIZATION_PATH', 'organization_path', false, true),
    (3, 'REDIRECT_ROUTES', 'redirect_route', false, true),
    (4, 'USERNAMES', 'username', false, true),
    (5, 'EMAILS', 'email', false, true),
    (6, 'PROJECT_IDS', 'project_id', true, true),
    (7, 'NAMESPACE_IDS', 'namespace_id', true, true),
    (8, 'GPG_KEYS', 'gpg_key', false, true),
    (9, 'SSH_KEYS', 'ssh_key', false, true),
    (10, 'USER_IDS', 'user_id', true, true),
    (11, 'ORGANIZATION_IDS', 'organization_id', true, true),
    (12, 'SERVICE_DESK_CUSTOM_EMAILS', 'service_desk_custom_email', false, true),
    (13, 'GPG_KEY_FINGERPRINTS', 'gpg_key_fingerprint', false, true),
    (15, 'SSH_KEY_FINGERPRINTS', 'ssh_key_fingerprint', false, true),
    (16, 'SNIPPET_IDS', 'snippet_id', true, true),
    (17, 'PAGES_DOMAINS', 'pages_domain', false, true),
    (18, 'PAGES_UNIQUE_DOMAINS', 'pages_unique_domain', false, true);

INSERT INTO @extschema@.claim_subject_types (type_id, name, aliases, builtin) VALUES
    (1, 'ORGANIZATION', '{}', true),
    (2, 'NAMESPACE', '{GROUP}', true),
    (3, 'PROJECT', '{}', true),
    (4, 'USER', '{}', true);

INSERT INTO @extschema@.claim_source_types (type_id, name, aliases, builtin) VALUES
    (1, 'RAILS_TABLE_USERS', '{}', true),
    (2, 'RAILS_TABLE_EMAILS', '{}', true),
    (3, 'RAILS_TABLE_ROUTES', '{}', true),
    (4, 'RAILS_TABLE_PROJECTS', '{}', true),
    (5, 'RAILS_TABLE_NAMESPACES', '{RAILS_TABLE_GROUPS}', true),
    (6, 'RAILS_TABLE_ORGANIZATIONS', '{}', true),
    (7, 'RAILS_TABLE_REDIRECT_ROUTES', '{}', true),
    (8, 'RAILS_TABLE_GPG_KEYS', '{}', true),
    (9, 'RAILS_TABLE_KEYS', '{}', true),
    (10, 'RAILS_TABLE_SERVICE_DESK_SETTINGS', '{}', true),
    (11, 'RAILS_TABLE_MEMBERS', '{}', true),
    (12, 'RAILS_TABLE_SNIPPETS', '{}', true),
    (13, 'RAILS_TABLE_PAGES_DOMAINS', '{}', true),
    (14, 'RAILS_TABLE_PROJECT_SETTINGS', '{}', true);

-- One row per claimed value. The key is (bucket_type, sha256 of the value),
-- so values of any length and script fit the unique index; bucket_value is
-- kept in full and compared on every read.
CREATE TABLE @extschema@.claims (
    uuid                 uuid PRIMARY KEY,
    bucket_type          integer NOT NULL,
    bucket_value         text COLLATE "C" NOT NULL,
    bucket_digest        bytea NOT NULL,
    subject_type         integer NOT NULL,
    subject_id           bigint NOT NULL,
    source_type          integer NOT NULL,
    source_id            bytea NOT NULL,
    user_data            jsonb,
    creator_id           bigint NOT NULL CHECK (creator_id > 0),
    lease_uuid           uuid,
    status               @extschema@.claim_status NOT NULL,
    replace_subject_type integer,
    replace_subject_id   bigint,
    replace_source_type  integer,
    replace_source_id    bytea,
    replace_user_data    jsonb,
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT claims_bucket_key UNIQUE (bucket_type, bucket_digest),
    CONSTRAINT claims_digest_length CHECK (octet_length(bucket_digest) = 32),
    CONSTRAINT claims_source_id_length CHECK (octet_length(source_id) BETWEEN 1 AND 128),
    CONSTRAINT claims_lease_matches_status CHECK ((lease_uuid IS NULL) = (status = 'ACTIVE')),
    CONSTRAINT claims_replace_only_while_destroying CHECK (
        (replace_subject_type IS NULL AND replace_subject_id IS NULL
         AND replace_source_type IS NULL AND replace_source_id IS NULL
         AND replace_user_data IS NULL)
        OR (status = 'LEASE_DESTROYING' AND replace_subject_type IS NOT NULL
            AND replace_subject_id IS NOT NULL AND replace_source_type IS NOT NULL
            AND replace_source_id IS NOT NULL))
) WITH (fillfactor = 80);
COMMENT ON TABLE @extschema@.claims IS
    'Claimed values and the cell owning each; lease_uuid is set while a lease changes the row';

-- Verification scans: a cell's claims of one source table in source id order.
CREATE INDEX claims_source_idx
    ON @extschema@.claims (creator_id, source_type, source_id, bucket_type, bucket_digest);

-- Leases. Finished leases are kept as an audit trail and to answer late
-- commits and rollbacks. claim_types/claim_digests are the keys the lease
-- holds, sorted, so commit and rollback find their rows without an index on
-- claims.lease_uuid (which keeps those updates HOT).
CREATE TABLE @extschema@.claim_leases (
    uuid          uuid PRIMARY KEY,
    creator_id    bigint NOT NULL CHECK (creator_id > 0),
    payload       jsonb NOT NULL,
    state         @extschema@.claim_lease_state NOT NULL DEFAULT 'outstanding',
    claim_types   integer[] NOT NULL,
    claim_digests bytea[] NOT NULL,
    creates_only  boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    finished_by   text,
    finish_reason text,
    CONSTRAINT claim_leases_finished_when_done CHECK ((state = 'outstanding') = (finished_at IS NULL)),
    CONSTRAINT claim_leases_keys_match CHECK (cardinality(claim_types) = cardinality(claim_digests))
);
COMMENT ON TABLE @extschema@.claim_leases IS
    'Leases with their full request payload; outstanding until committed or rolled back';

-- Reconciliation: a cell's outstanding leases in (created_at, uuid) order.
CREATE INDEX claim_leases_outstanding_idx
    ON @extschema@.claim_leases (creator_id, created_at, uuid)
    WHERE state = 'outstanding';

-- History pruning: finished leases by age.
CREATE INDEX claim_leases_finished_idx
    ON @extschema@.claim_leases (finished_at)
    WHERE state <> 'outstanding';

-- Registry changes reach every backend's cached copy through a relcache
-- invalidation sent by this trigger.
CREATE FUNCTION @extschema@.claims_registry_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_registry_changed'
LANGUAGE C;

CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_bucket_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();
CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_subject_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();
CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_source_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();

-- The API. Each function judges the role that called it, then runs its
-- statements as the extension's owner with the search path pinned to
-- pg_catalog alone (in C, for the length of the call: cheaper than a SET
-- clause, which saves and restores the setting on every call); every
-- statement inside is schema-qualified and takes values only as parameters.
CREATE FUNCTION @extschema@.claims_begin_update(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_begin_update'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.claims_commit(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_commit'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.claims_rollback(cell_id bigint, lease_uuid uuid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_rollback'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

CREATE FUNCTION @extschema@.claims_get_record(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_get_record'
LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.claims_list_leases(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_leases'
LANGUAGE C STABLE PARALLEL RESTRICTED;

CREATE FUNCTION @extschema@.claims_list_records(request jsonb)
RETURNS jsonb
AS 'MODULE_PATHNAME', 'claims_list_records'
LANGUAGE C STABLE PARALLEL RESTRICTED;

COMMENT ON FUNCTION @extschema@.claims_begin_update(jsonb) IS
    'BeginUpdate: lease creates and destroys of one batch, all or nothing';
COMMENT ON FUNCTION @extschema@.claims_commit(bigint, uuid) IS
    'CommitUpdate: make a lease''s changes permanent (repeatable)';
COMMENT ON FUNCTION @extschema@.claims_rollback(bigint, uuid) IS
    'RollbackUpdate: undo a lease''s changes (repeatable)';
COMMENT ON FUNCTION @extschema@.claims_get_record(jsonb) IS
    'GetRecord: the record of one value, or NULL when unclaimed';
COMMENT ON FUNCTION @extschema@.claims_list_leases(jsonb) IS
    'ListLeases: a cell''s outstanding leases, keyset-paged';
COMMENT ON FUNCTION @extschema@.claims_list_records(jsonb) IS
    'ListRecords: a cell''s claims of one source type in source id order';


-- Roles of the security model (cluster-wide; created when missing and kept
-- on DROP EXTENSION): administrators, the router, and the group of cells.
DO $roles$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'claims_admin') THEN
        CREATE ROLE claims_admin NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'claims_router') THEN
        CREATE ROLE claims_router NOLOGIN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'claims_cell') THEN
        CREATE ROLE claims_cell NOLOGIN;
    END IF;
END
$roles$;

-- Cells and the database role each connects as.
CREATE TABLE @extschema@.claim_cells (
    cell_id    bigint PRIMARY KEY CHECK (cell_id > 0),
    name       text NOT NULL UNIQUE CHECK (name <> ''),
    role_name  text NOT NULL CHECK (role_name <> ''),
    disabled   boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.claim_cells IS
    'Registered cells: calls for a cell are accepted only from its role or an administrator';

CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_cells
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();

-- Every administrator action: who, when, what, why.
CREATE TABLE @extschema@.claim_admin_actions (
    action_id    bigserial PRIMARY KEY,
    at           timestamptz NOT NULL DEFAULT now(),
    actor        text NOT NULL,
    session_role text NOT NULL,
    action       text NOT NULL,
    cell_id      bigint,
    lease_uuid   uuid,
    reason       text,
    detail       jsonb NOT NULL DEFAULT '{}'
);
COMMENT ON TABLE @extschema@.claim_admin_actions IS 'Audit log of administrator actions';

CREATE FUNCTION @extschema@.claims_require_admin()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_require_admin'
LANGUAGE C STABLE;

CREATE FUNCTION @extschema@.claims_caller()
RETURNS text
AS 'MODULE_PATHNAME', 'claims_caller'
LANGUAGE C STABLE;

CREATE FUNCTION @extschema@.claims_lock_cell(cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_lock_cell'
LANGUAGE C VOLATILE STRICT;

-- Record one administrator action.
CREATE FUNCTION @extschema@.claims_audit(action text, cell_id bigint, lease_uuid uuid,
                                         reason text, detail jsonb)
RETURNS void
LANGUAGE sql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    INSERT INTO @extschema@.claim_admin_actions
        (actor, session_role, action, cell_id, lease_uuid, reason, detail)
    VALUES (@extschema@.claims_caller(), session_user, $1, $2, $3, $4, coalesce($5, '{}'));
$$;

-- Register a cell with the role it connects as.
CREATE FUNCTION @extschema@.claims_register_cell(cell_id bigint, cell_name text, role_name text,
                                                 reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_register_cell.cell_id IS NULL OR cell_name IS NULL OR claims_register_cell.role_name IS NULL THEN
        RAISE EXCEPTION 'cell_id, cell_name and role_name must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF claims_register_cell.cell_id <= 0 THEN
        RAISE EXCEPTION 'cell_id must be greater than 0, not %', claims_register_cell.cell_id
            USING ERRCODE = '22023';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = claims_register_cell.role_name) THEN
        RAISE EXCEPTION 'role "%" does not exist', claims_register_cell.role_name
            USING ERRCODE = '42704';
    END IF;
    INSERT INTO @extschema@.claim_cells (cell_id, name, role_name)
    VALUES (claims_register_cell.cell_id, cell_name, claims_register_cell.role_name);
    EXECUTE pg_catalog.format('GRANT claims_cell TO %I', claims_register_cell.role_name);
    PERFORM @extschema@.claims_audit('register_cell', claims_register_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('name', cell_name, 'role', claims_register_cell.role_name));
END
$$;

-- Rename a cell.
CREATE FUNCTION @extschema@.claims_rename_cell(cell_id bigint, new_name text, reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    old_name text;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_rename_cell.cell_id IS NULL OR new_name IS NULL THEN
        RAISE EXCEPTION 'cell_id and new_name must not be NULL' USING ERRCODE = '22004';
    END IF;
    SELECT c.name INTO old_name FROM @extschema@.claim_cells c
    WHERE c.cell_id = claims_rename_cell.cell_id FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_rename_cell.cell_id USING ERRCODE = 'P0002';
    END IF;
    UPDATE @extschema@.claim_cells c SET name = new_name, updated_at = now()
    WHERE c.cell_id = claims_rename_cell.cell_id;
    PERFORM @extschema@.claims_audit('rename_cell', claims_rename_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('old_name', old_name, 'new_name', new_name));
END
$$;

-- Disable or enable a cell: a disabled cell's calls are refused.
CREATE FUNCTION @extschema@.claims_set_cell_disabled(cell_id bigint, disabled boolean, reason text DEFAULT NULL)
RETURNS void
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_set_cell_disabled.cell_id IS NULL OR claims_set_cell_disabled.disabled IS NULL THEN
        RAISE EXCEPTION 'cell_id and disabled must not be NULL' USING ERRCODE = '22004';
    END IF;
    UPDATE @extschema@.claim_cells c
    SET disabled = claims_set_cell_disabled.disabled, updated_at = now()
    WHERE c.cell_id = claims_set_cell_disabled.cell_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_set_cell_disabled.cell_id USING ERRCODE = 'P0002';
    END IF;
    PERFORM @extschema@.claims_audit(CASE WHEN claims_set_cell_disabled.disabled
                                          THEN 'disable_cell' ELSE 'enable_cell' END,
                                     claims_set_cell_disabled.cell_id, NULL, reason, '{}');
END
$$;

-- Every outstanding lease of every cell, for administrators.
CREATE VIEW @extschema@.claims_outstanding_leases AS
    SELECT l.creator_id AS cell_id, l.uuid AS lease_uuid, l.created_at,
           now() - l.created_at AS age, cardinality(l.claim_types) AS records, l.payload
    FROM @extschema@.claim_leases l
    WHERE l.state = 'outstanding';

-- Force-finish a stuck lease of any cell, recording the operator's reason.
CREATE FUNCTION @extschema@.claims_admin_finish_lease(lease_uuid uuid, action text, reason text)
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

-- Decommission a cell: release all of its claims so the values are free
-- again, and disable it. Refuses while the cell has outstanding leases
-- unless forced, in which case they are rolled back first.
CREATE FUNCTION @extschema@.claims_decommission_cell(cell_id bigint, reason text, force boolean DEFAULT false)
RETURNS jsonb
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    outstanding bigint;
    rolled_back bigint := 0;
    released bigint;
    lease record;
BEGIN
    PERFORM @extschema@.claims_require_admin();
    IF claims_decommission_cell.cell_id IS NULL OR reason IS NULL OR force IS NULL THEN
        RAISE EXCEPTION 'cell_id, reason and force must not be NULL' USING ERRCODE = '22004';
    END IF;
    IF btrim(reason) = '' THEN
        RAISE EXCEPTION 'a reason is required' USING ERRCODE = '22023';
    END IF;
    -- wait for the cell's begin_updates in progress; hold off new ones
    PERFORM @extschema@.claims_lock_cell(claims_decommission_cell.cell_id);
    UPDATE @extschema@.claim_cells c SET disabled = true, updated_at = now()
    WHERE c.cell_id = claims_decommission_cell.cell_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'cell % is not registered', claims_decommission_cell.cell_id USING ERRCODE = 'P0002';
    END IF;

    SELECT count(*) INTO outstanding FROM @extschema@.claim_leases l
    WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding';
    IF outstanding > 0 AND NOT force THEN
        RAISE EXCEPTION 'cell % has % outstanding leases', claims_decommission_cell.cell_id, outstanding
            USING ERRCODE = '55000',
                  HINT = 'Let the cell finish them, or pass force => true to roll them back.';
    END IF;
    FOR lease IN
        SELECT l.uuid FROM @extschema@.claim_leases l
        WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding'
        ORDER BY l.created_at, l.uuid
    LOOP
        PERFORM @extschema@.claims_rollback(claims_decommission_cell.cell_id, lease.uuid);
        UPDATE @extschema@.claim_leases l
        SET finished_by = @extschema@.claims_caller(), finish_reason = reason
        WHERE l.uuid = lease.uuid;
        rolled_back := rolled_back + 1;
    END LOOP;

    WITH locked AS (
        SELECT c.uuid FROM @extschema@.claims c
        WHERE c.creator_id = claims_decommission_cell.cell_id AND c.lease_uuid IS NULL
        ORDER BY c.bucket_type, c.bucket_digest
        FOR UPDATE
    )
    DELETE FROM @extschema@.claims c USING locked WHERE c.uuid = locked.uuid;
    GET DIAGNOSTICS released = ROW_COUNT;

    IF EXISTS (SELECT 1 FROM @extschema@.claim_leases l
               WHERE l.creator_id = claims_decommission_cell.cell_id AND l.state = 'outstanding') THEN
        RAISE EXCEPTION 'cell % took new leases while it was being decommissioned', claims_decommission_cell.cell_id
            USING ERRCODE = '55000',
                  HINT = 'Disable the cell with claims_set_cell_disabled() first, then decommission it.';
    END IF;

    PERFORM @extschema@.claims_audit('decommission_cell', claims_decommission_cell.cell_id, NULL, reason,
        pg_catalog.jsonb_build_object('claims_released', released, 'leases_rolled_back', rolled_back,
                                      'force', force));
    RETURN pg_catalog.jsonb_build_object('cell_id', claims_decommission_cell.cell_id::text,
        'claims_released', released, 'leases_rolled_back', rolled_back, 'disabled', true);
END
$$;

COMMENT ON FUNCTION @extschema@.claims_require_admin() IS
    'Raise 42501 unless the calling role is an administrator (superuser or member of claims_admin)';
COMMENT ON FUNCTION @extschema@.claims_caller() IS
    'The acting role, as the audit log records it';
COMMENT ON FUNCTION @extschema@.claims_lock_cell(bigint) IS
    'Wait for a cell''s lease creations in progress and hold off new ones until the transaction ends';
COMMENT ON FUNCTION @extschema@.claims_audit(text, bigint, uuid, text, jsonb) IS
    'Record one administrator action in claim_admin_actions';
COMMENT ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text) IS
    'Register a cell with the role it connects as (administrators)';
COMMENT ON FUNCTION @extschema@.claims_rename_cell(bigint, text, text) IS
    'Rename a registered cell (administrators)';
COMMENT ON FUNCTION @extschema@.claims_set_cell_disabled(bigint, boolean, text) IS
    'Disable or enable a cell; a disabled cell''s own calls are refused (administrators)';
COMMENT ON VIEW @extschema@.claims_outstanding_leases IS
    'Every outstanding lease of every cell, with its age and request payload (administrators)';
COMMENT ON FUNCTION @extschema@.claims_admin_finish_lease(uuid, text, text) IS
    'Force-finish a lease of any cell with a recorded reason (administrators)';
COMMENT ON FUNCTION @extschema@.claims_decommission_cell(bigint, text, boolean) IS
    'Release all claims of a cell and disable it (administrators)';

-- Nobody writes the tables directly; the registries are reference data.
-- Cells reach the data only through the functions; a cell sees only what
-- its own calls return. Administrators may read everything.
REVOKE ALL ON TABLE @extschema@.claims, @extschema@.claim_leases, @extschema@.claim_cells,
    @extschema@.claim_admin_actions FROM PUBLIC;
REVOKE ALL ON SEQUENCE @extschema@.claim_admin_actions_action_id_seq FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claim_bucket_types, @extschema@.claim_subject_types,
    @extschema@.claim_source_types FROM PUBLIC;
GRANT SELECT ON TABLE @extschema@.claim_bucket_types, @extschema@.claim_subject_types,
    @extschema@.claim_source_types TO PUBLIC;
GRANT SELECT ON TABLE @extschema@.claims, @extschema@.claim_leases, @extschema@.claim_cells,
    @extschema@.claim_admin_actions TO claims_admin;
REVOKE ALL ON @extschema@.claims_outstanding_leases FROM PUBLIC;
GRANT SELECT ON @extschema@.claims_outstanding_leases TO claims_admin;

REVOKE ALL ON FUNCTION @extschema@.claims_registry_changed() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.claims_begin_update(jsonb), @extschema@.claims_commit(bigint, uuid),
    @extschema@.claims_rollback(bigint, uuid), @extschema@.claims_list_leases(jsonb),
    @extschema@.claims_list_records(jsonb), @extschema@.claims_get_record(jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_begin_update(jsonb), @extschema@.claims_commit(bigint, uuid),
    @extschema@.claims_rollback(bigint, uuid), @extschema@.claims_list_leases(jsonb),
    @extschema@.claims_list_records(jsonb), @extschema@.claims_get_record(jsonb)
    TO claims_cell, claims_admin;
GRANT EXECUTE ON FUNCTION @extschema@.claims_get_record(jsonb) TO claims_router;

REVOKE ALL ON FUNCTION @extschema@.claims_audit(text, bigint, uuid, text, jsonb) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.claims_lock_cell(bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text),
    @extschema@.claims_rename_cell(bigint, text, text),
    @extschema@.claims_set_cell_disabled(bigint, boolean, text),
    @extschema@.claims_admin_finish_lease(uuid, text, text),
    @extschema@.claims_decommission_cell(bigint, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_register_cell(bigint, text, text, text),
    @extschema@.claims_rename_cell(bigint, text, text),
    @extschema@.claims_set_cell_disabled(bigint, boolean, text),
    @extschema@.claims_admin_finish_lease(uuid, text, text),
    @extschema@.claims_decommission_cell(bigint, text, boolean) TO claims_admin;

-- pg_dump keeps the data; seeded registry rows come back with CREATE EXTENSION.
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claims', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_leases', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_bucket_types', 'WHERE NOT builtin');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_subject_types', 'WHERE NOT builtin');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_source_types', 'WHERE NOT builtin');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_cells', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_admin_actions', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claim_admin_actions_action_id_seq', '');

-- Consistency check for operators: one row per violated invariant of the
-- data model, nothing when the store is healthy. Run it after an incident
-- (crash, failover, restore, manual repair), together with amcheck on the
-- indexes. One snapshot, set-based: a few sequential scans of claims and
-- claim_leases, whatever their size; only the claims under a lease and the
-- keys of outstanding leases are joined row by row.
CREATE FUNCTION @extschema@.claims_check()
RETURNS TABLE (invariant text, detail text, claim_uuid uuid, lease_uuid uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $claims_check$
WITH leased AS MATERIALIZED (
    -- claims currently under a lease (normally few)
    SELECT c.uuid, c.lease_uuid, c.creator_id, c.bucket_type, c.bucket_digest, c.status
    FROM @extschema@.claims c
    WHERE c.lease_uuid IS NOT NULL
), open_leases AS MATERIALIZED (
    SELECT l.uuid, l.creator_id, l.payload, l.claim_types, l.claim_digests, l.creates_only
    FROM @extschema@.claim_leases l
    WHERE l.state = 'outstanding'
), open_keys AS MATERIALIZED (
    -- every key an outstanding lease says it holds
    SELECT o.uuid AS lease_uuid, o.creator_id, k.bucket_type, k.bucket_digest
    FROM open_leases o
    CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(o.claim_types), pg_catalog.unnest(o.claim_digests))
        AS k(bucket_type, bucket_digest)
), unmatched AS MATERIALIZED (
    -- keys of outstanding leases and leased claims that do not pair up; a
    -- full join on equality runs as a hash or merge join, never row by row
    SELECT k.lease_uuid AS k_lease, k.bucket_type AS k_type, k.bucket_digest AS k_digest,
           c.uuid AS c_uuid, c.lease_uuid AS c_lease, c.bucket_type AS c_type,
           c.bucket_digest AS c_digest
    FROM open_keys k
    FULL JOIN leased c
      ON c.lease_uuid = k.lease_uuid AND c.bucket_type = k.bucket_type
     AND c.bucket_digest = k.bucket_digest
    WHERE k.lease_uuid IS NULL OR c.uuid IS NULL
), claim_rows AS (
    -- row-local checks of every claim; details are built for failing rows only
    SELECT c.uuid, c.lease_uuid, c.status, c.bucket_type, c.bucket_value,
           c.subject_type, c.subject_id, c.source_type,
           c.replace_subject_type, c.replace_source_type,
           (c.lease_uuid IS NULL) <> (c.status = 'ACTIVE') AS bad_status,
           (c.replace_subject_type IS NOT NULL OR c.replace_subject_id IS NOT NULL
            OR c.replace_source_type IS NOT NULL OR c.replace_source_id IS NOT NULL
            OR c.replace_user_data IS NOT NULL) AS has_replace,
           (c.replace_subject_type IS NULL OR c.replace_subject_id IS NULL
            OR c.replace_source_type IS NULL OR c.replace_source_id IS NULL
            OR pg_catalog.octet_length(c.replace_source_id) NOT BETWEEN 1 AND 128) AS replace_incomplete,
           (pg_catalog.octet_length(c.bucket_digest) <> 32
            OR c.bucket_digest <> pg_catalog.sha256(pg_catalog.convert_to(
                   c.bucket_value, pg_catalog.getdatabaseencoding()))) AS bad_digest,
           (pg_catalog.char_length(c.bucket_value) NOT BETWEEN 1 AND 1024) AS bad_length,
           (bt.integer_valued AND NOT CASE
                WHEN c.bucket_value ~ '^(0|-?[1-9][0-9]{0,18})$'
                THEN c.bucket_value::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
                ELSE false END) AS bad_integer,
           bt.type_id IS NULL AS bad_bucket_type,
           st.type_id IS NULL AS bad_subject_type,
           so.type_id IS NULL AS bad_source_type,
           (c.replace_subject_type IS NOT NULL AND rst.type_id IS NULL) AS bad_replace_subject_type,
           (c.replace_source_type IS NOT NULL AND rso.type_id IS NULL) AS bad_replace_source_type,
           (c.subject_id = 0) AS bad_subject_id,
           (c.creator_id <= 0) AS bad_creator
    FROM @extschema@.claims c
    LEFT JOIN @extschema@.claim_bucket_types bt ON bt.type_id = c.bucket_type
    LEFT JOIN @extschema@.claim_subject_types st ON st.type_id = c.subject_type
    LEFT JOIN @extschema@.claim_source_types so ON so.type_id = c.source_type
    LEFT JOIN @extschema@.claim_subject_types rst ON rst.type_id = c.replace_subject_type
    LEFT JOIN @extschema@.claim_source_types rso ON rso.type_id = c.replace_source_type
)
SELECT v.invariant, v.detail, r.uuid, r.lease_uuid
FROM claim_rows r
CROSS JOIN LATERAL (VALUES
    ('claim_status_lease_mismatch', r.bad_status,
     pg_catalog.format('status %s but lease_uuid %s', r.status,
                       coalesce(r.lease_uuid::text, 'NULL'))),
    ('claim_replace_without_lease', r.has_replace AND r.lease_uuid IS NULL,
     'replace columns are set on a claim no lease holds'),
    ('claim_replace_not_destroying', r.has_replace AND r.lease_uuid IS NOT NULL
                                     AND r.status <> 'LEASE_DESTROYING',
     pg_catalog.format('replace columns are set on a row in status %s', r.status)),
    ('claim_replace_incomplete', r.has_replace AND r.replace_incomplete,
     'replace subject or source is partly missing'),
    ('claim_digest_mismatch', r.bad_digest,
     'bucket_digest is not the SHA-256 of bucket_value'),
    ('claim_value_length', r.bad_length,
     pg_catalog.format('value of %s characters', pg_catalog.char_length(r.bucket_value))),
    ('claim_value_not_canonical_integer', coalesce(r.bad_integer, false),
     pg_catalog.format('bucket type %s holds integers; value %L', r.bucket_type,
                       pg_catalog.left(r.bucket_value, 64))),
    ('unregistered_bucket_type', r.bad_bucket_type,
     pg_catalog.format('bucket_type %s', r.bucket_type)),
    ('unregistered_subject_type', r.bad_subject_type,
     pg_catalog.format('subject_type %s', r.subject_type)),
    ('unregistered_source_type', r.bad_source_type,
     pg_catalog.format('source_type %s', r.source_type)),
    ('unregistered_subject_type', r.bad_replace_subject_type,
     pg_catalog.format('replace_subject_type %s', r.replace_subject_type)),
    ('unregistered_source_type', r.bad_replace_source_type,
     pg_catalog.format('replace_source_type %s', r.replace_source_type)),
    ('claim_subject_unset', r.bad_subject_id, 'subject_id is 0'),
    ('claim_creator_invalid', r.bad_creator, 'creator_id is not a cell number')
) AS v(invariant, failed, detail)
WHERE (r.bad_status OR r.has_replace OR r.bad_digest OR r.bad_length
       OR coalesce(r.bad_integer, false) OR r.bad_bucket_type OR r.bad_subject_type
       OR r.bad_source_type OR r.bad_replace_subject_type OR r.bad_replace_source_type
       OR r.bad_subject_id OR r.bad_creator)
  AND v.failed

UNION ALL
-- a leased claim whose lease does not exist or is finished
SELECT CASE WHEN l.uuid IS NULL THEN 'claim_lease_missing' ELSE 'claim_lease_not_outstanding' END,
       CASE WHEN l.uuid IS NULL THEN pg_catalog.format('%s row under a lease that does not exist', c.status)
            ELSE pg_catalog.format('%s row under a %s lease', c.status, l.state) END,
       c.uuid, c.lease_uuid
FROM leased c
LEFT JOIN @extschema@.claim_leases l ON l.uuid = c.lease_uuid
WHERE l.uuid IS NULL OR l.state <> 'outstanding'

UNION ALL
-- an outstanding lease holding a claim of another cell
SELECT 'lease_holds_other_cells_claim',
       pg_catalog.format('lease of cell %s holds a claim of cell %s', o.creator_id, c.creator_id),
       c.uuid, c.lease_uuid
FROM leased c
JOIN open_leases o ON o.uuid = c.lease_uuid
WHERE o.creator_id <> c.creator_id

UNION ALL
-- a lease marked creates-only (finished by the short statements) holding a
-- claim it destroys or replaces
SELECT 'lease_creates_only_mismatch',
       'creates-only lease holds a LEASE_DESTROYING row',
       c.uuid, c.lease_uuid
FROM leased c
JOIN open_leases o ON o.uuid = c.lease_uuid
WHERE o.creates_only AND c.status = 'LEASE_DESTROYING'

UNION ALL
-- a claim under an outstanding lease that does not list its key
SELECT 'claim_not_listed_in_lease',
       pg_catalog.format('bucket_type %s, digest %s is not among the lease''s claim keys',
                         m.c_type, pg_catalog.encode(m.c_digest, 'hex')),
       m.c_uuid, m.c_lease
FROM unmatched m
JOIN open_leases o ON o.uuid = m.c_lease
WHERE m.k_lease IS NULL

UNION ALL
-- lost lease: an outstanding lease lists a key whose claim row it does not hold
SELECT 'lost_lease',
       CASE WHEN c.uuid IS NULL
            THEN pg_catalog.format('bucket_type %s, digest %s has no claim row',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'))
            WHEN c.lease_uuid IS NULL
            THEN pg_catalog.format('bucket_type %s, digest %s is ACTIVE, under no lease',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'))
            ELSE pg_catalog.format('bucket_type %s, digest %s is under lease %s',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'), c.lease_uuid)
       END,
       c.uuid, m.k_lease
FROM unmatched m
LEFT JOIN @extschema@.claims c
  ON c.bucket_type = m.k_type AND c.bucket_digest = m.k_digest
WHERE m.c_uuid IS NULL

UNION ALL
-- an outstanding lease listing one key twice, or a malformed key
SELECT 'lease_keys_malformed', d.why, NULL::uuid, d.lease_uuid
FROM (
    SELECT k.lease_uuid,
           pg_catalog.format('key bucket_type %s, digest %s listed %s times',
                             k.bucket_type, pg_catalog.encode(k.bucket_digest, 'hex'),
                             pg_catalog.count(*)) AS why
    FROM open_keys k
    GROUP BY k.lease_uuid, k.bucket_type, k.bucket_digest
    HAVING pg_catalog.count(*) > 1
    UNION ALL
    SELECT k.lease_uuid, 'a key has a NULL part or a digest that is not 32 bytes'
    FROM open_keys k
    WHERE k.bucket_type IS NULL OR k.bucket_digest IS NULL
       OR pg_catalog.octet_length(k.bucket_digest) <> 32
    GROUP BY k.lease_uuid
    UNION ALL
    SELECT o.uuid, pg_catalog.format('%s claim types but %s claim digests',
                                     pg_catalog.cardinality(o.claim_types),
                                     pg_catalog.cardinality(o.claim_digests))
    FROM open_leases o
    WHERE pg_catalog.cardinality(o.claim_types) <> pg_catalog.cardinality(o.claim_digests)
    UNION ALL
    SELECT o.uuid, 'an outstanding lease without keys'
    FROM open_leases o
    WHERE pg_catalog.cardinality(o.claim_types) = 0
) d

UNION ALL
-- an outstanding lease whose stored request names another cell
SELECT 'lease_payload_cell_mismatch',
       pg_catalog.format('lease of cell %s stores a request of cell_id %s',
                         o.creator_id, coalesce(o.payload->'cell_id', o.payload->'cellId')),
       NULL::uuid, o.uuid
FROM open_leases o
WHERE NOT (CASE WHEN pg_catalog.jsonb_typeof(coalesce(o.payload->'cell_id', o.payload->'cellId'))
                     IN ('number', 'string')
                 AND coalesce(o.payload->>'cell_id', o.payload->>'cellId') ~ '^\+?[0-9]{1,19}(\.0*)?$'
                THEN coalesce(o.payload->>'cell_id', o.payload->>'cellId')::numeric = o.creator_id
                ELSE false END)

UNION ALL
-- lease state and finished_at must agree
SELECT 'lease_finished_at_mismatch',
       CASE WHEN l.state = 'outstanding' THEN 'outstanding lease with finished_at set'
            ELSE pg_catalog.format('%s lease without finished_at', l.state) END,
       NULL::uuid, l.uuid
FROM @extschema@.claim_leases l
WHERE (l.state = 'outstanding') <> (l.finished_at IS NULL)

ORDER BY 1, 4, 3
$claims_check$;

COMMENT ON FUNCTION @extschema@.claims_check() IS
    'Consistency check: one row per violated invariant of claims and claim_leases; empty when healthy';
REVOKE ALL ON FUNCTION @extschema@.claims_check() FROM PUBLIC;

-- Monitoring. Outstanding leases older than claims.stale_lease_threshold,
-- the question the stale lease reporter asks, answered live with or without
-- it. Until the library is loaded in a session the setting is read from the
-- server configuration, or its default.
CREATE VIEW @extschema@.claims_stale_leases AS
SELECT l.creator_id AS cell_id,
       l.uuid AS lease_uuid,
       pg_catalog.now() - l.created_at AS age,
       l.created_at,
       l.payload
FROM @extschema@.claim_leases l
WHERE l.state = 'outstanding'
  AND l.created_at < pg_catalog.now() - COALESCE(
        pg_catalog.current_setting('claims.stale_lease_threshold', true), '10min')::pg_catalog.interval;
COMMENT ON VIEW @extschema@.claims_stale_leases IS
    'Outstanding leases older than claims.stale_lease_threshold, with their request payloads';
-- The payloads hold personal data: the owner (and whom it grants) only.
REVOKE ALL ON TABLE @extschema@.claims_stale_leases FROM PUBLIC;

-- Statistics in shared memory (needs shared_preload_libraries = 'claims').
-- Counts are of calls since the last reset, taken before the caller's
-- transaction commits; errors are counted when raised.
CREATE FUNCTION @extschema@.claims_stats(
    OUT begin_updates bigint,
    OUT claims_created bigint,
    OUT claims_destroyed bigint,
    OUT claims_replaced bigint,
    OUT commits bigint,
    OUT rollbacks bigint,
    OUT repeated_commits bigint,
    OUT repeated_rollbacks bigint,
    OUT conflicts_permanent bigint,
    OUT conflicts_temporary bigint,
    OUT malformed_requests bigint,
    OUT ownership_violations bigint,
    OUT not_found bigint,
    OUT worker_last_run timestamptz,
    OUT stale_leases bigint,
    OUT oldest_stale_age interval,
    OUT stats_reset timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_stats'
LANGUAGE C VOLATILE PARALLEL SAFE;

CREATE VIEW @extschema@.claims_stats AS
SELECT * FROM @extschema@.claims_stats();

CREATE FUNCTION @extschema@.claims_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME', 'claims_stats_reset'
LANGUAGE C VOLATILE PARALLEL SAFE;

COMMENT ON FUNCTION @extschema@.claims_stats() IS
    'Counts of API calls and outcomes since the last reset, and the stale lease reporter''s latest findings';
COMMENT ON VIEW @extschema@.claims_stats IS
    'Counts of API calls and outcomes since the last reset, and the stale lease reporter''s latest findings';
COMMENT ON FUNCTION @extschema@.claims_stats_reset() IS
    'Start the claims_stats counters from zero';

REVOKE ALL ON FUNCTION @extschema@.claims_stats() FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.claims_stats_reset() FROM PUBLIC;
REVOKE ALL ON TABLE @extschema@.claims_stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats() TO pg_monitor;
GRANT SELECT ON TABLE @extschema@.claims_stats TO pg_monitor;

-- Administrators run the consistency check, read the stale leases and may
-- reset the statistics.
GRANT EXECUTE ON FUNCTION @extschema@.claims_check() TO claims_admin;
GRANT SELECT ON @extschema@.claims_stale_leases TO claims_admin;
GRANT EXECUTE ON FUNCTION @extschema@.claims_stats_reset() TO claims_admin;
