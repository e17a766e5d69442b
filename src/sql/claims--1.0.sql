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

#include "udfs/claims_registry_changed/1.0.sql"

CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_bucket_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();
CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_subject_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();
CREATE TRIGGER claims_registry_changed
    AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON @extschema@.claim_source_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_registry_changed();

#include "udfs/claims_begin_update/1.0.sql"

#include "udfs/claims_commit.bigint_uuid/1.0.sql"

#include "udfs/claims_rollback.bigint_uuid/1.0.sql"

#include "udfs/claims_get_record/1.0.sql"

#include "udfs/claims_list_leases/1.0.sql"

#include "udfs/claims_list_records/1.0.sql"

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

#include "udfs/claims_require_admin/1.0.sql"

#include "udfs/claims_caller/1.0.sql"

#include "udfs/claims_lock_cell/1.0.sql"

#include "udfs/claims_audit/1.0.sql"

#include "udfs/claims_register_cell/1.0.sql"

#include "udfs/claims_rename_cell/1.0.sql"

#include "udfs/claims_set_cell_disabled/1.0.sql"

-- Every outstanding lease of every cell, for administrators.
CREATE VIEW @extschema@.claims_outstanding_leases AS
    SELECT l.creator_id AS cell_id, l.uuid AS lease_uuid, l.created_at,
           now() - l.created_at AS age, cardinality(l.claim_types) AS records, l.payload
    FROM @extschema@.claim_leases l
    WHERE l.state = 'outstanding';

#include "udfs/claims_admin_finish_lease/1.0.sql"

#include "udfs/claims_decommission_cell/1.0.sql"

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

#include "udfs/claims_check/1.0.sql"

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

#include "udfs/claims_stats/1.0.sql"

CREATE VIEW @extschema@.claims_stats AS
SELECT * FROM @extschema@.claims_stats();

#include "udfs/claims_stats_reset/1.0.sql"

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
