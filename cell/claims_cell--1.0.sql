/* claims_cell--1.0.sql: claim a cell's unique columns at a claims store. */

\echo Use "CREATE EXTENSION claims_cell" to load this file. \quit

-- A foreign-data wrapper that only holds libpq options (like dblink_fdw):
-- the server names the store, the user mapping holds the cell's credentials.
CREATE FUNCTION @extschema@.store_validator(options text[], catalog oid)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_store_validator'
LANGUAGE C STRICT;

CREATE FOREIGN DATA WRAPPER claims_cell_store VALIDATOR @extschema@.store_validator;

-- Which store server and which cell this database is (one row).
CREATE TABLE @extschema@.configuration (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    server_name name NOT NULL,
    cell_id     bigint NOT NULL CHECK (cell_id > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.configuration IS 'The claims store server and this cell''s id (one row)';

-- Columns whose values are claimed at the store; triggers do the work.
CREATE TABLE @extschema@.claimed_columns (
    table_name     regclass NOT NULL,
    column_name    name NOT NULL,
    bucket_type    text NOT NULL,
    subject_type   text NOT NULL,
    subject_column name NOT NULL,
    source_type    text NOT NULL,
    source_column  name NOT NULL,
    enabled        boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_name, column_name)
);
COMMENT ON TABLE @extschema@.claimed_columns IS 'Columns claimed at the claims store';

-- One row per lease whose outcome at the store is not settled yet,
-- written by the local transaction that took the lease.
CREATE TABLE @extschema@.outstanding_leases (
    uuid       uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.outstanding_leases IS 'Leases taken at the store whose commit or rollback is not confirmed';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.configuration', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claimed_columns', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.outstanding_leases', '');

CREATE FUNCTION @extschema@.configure(server_name name, cell_id bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_configure'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.configure(name, bigint) IS
    'Name the claims store server (FOREIGN DATA WRAPPER claims_cell_store) and this cell''s id';

CREATE FUNCTION @extschema@.claim_column("table" regclass, "column" name, bucket_type text,
                                         subject_type text, subject_column name,
                                         source_type text DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_claim_column'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.claim_column(regclass, name, text, text, name, text) IS
    'Claim the values of a column at the store from now on';

CREATE FUNCTION @extschema@.set_claiming("table" regclass, "column" name, enabled boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_set_claiming'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.set_claiming(regclass, name, boolean) IS
    'Pause or resume claiming of a claimed column';

CREATE FUNCTION @extschema@.unclaim_column("table" regclass, "column" name)
RETURNS void
AS 'MODULE_PATHNAME', 'claims_cell_unclaim_column'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION @extschema@.unclaim_column(regclass, name) IS
    'Stop claiming a column and remove its triggers';

-- Row trigger of claimed columns: remembers each change for the commit.
CREATE FUNCTION @extschema@.collect()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_collect'
LANGUAGE C;

-- Statement trigger of claimed tables: TRUNCATE would bypass the claims.
CREATE FUNCTION @extschema@.refuse_truncate()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_cell_refuse_truncate'
LANGUAGE C;

CREATE FUNCTION @extschema@.stats(
    OUT scope text, OUT calls bigint, OUT begin_updates bigint, OUT commits bigint,
    OUT rollbacks bigint, OUT conflicts_permanent bigint, OUT conflicts_temporary bigint,
    OUT refusals bigint, OUT failures bigint, OUT timeouts bigint, OUT breaker_rejections bigint,
    OUT breaker_state text, OUT in_flight integer, OUT avg_latency_ms double precision,
    OUT max_latency_ms double precision)
RETURNS record
AS 'MODULE_PATHNAME', 'claims_cell_stats'
LANGUAGE C VOLATILE;

CREATE VIEW @extschema@.stats AS SELECT * FROM @extschema@.stats();

REVOKE ALL ON TABLE @extschema@.configuration, @extschema@.claimed_columns,
    @extschema@.outstanding_leases FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.configure(name, bigint),
    @extschema@.claim_column(regclass, name, text, text, name, text),
    @extschema@.set_claiming(regclass, name, boolean),
    @extschema@.unclaim_column(regclass, name),
    @extschema@.stats() FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;
