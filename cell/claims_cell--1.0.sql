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
-- Keyed by attribute number, so RENAME COLUMN and RENAME TABLE keep the
-- declaration; the view claimed_columns shows the current names.
CREATE TABLE @extschema@.claimed_attributes (
    table_name     regclass NOT NULL,
    attnum         smallint NOT NULL CHECK (attnum > 0),
    bucket_type    text NOT NULL,
    subject_type   text NOT NULL,
    subject_attnum smallint NOT NULL CHECK (subject_attnum > 0),
    source_type    text NOT NULL,
    source_attnum  smallint NOT NULL CHECK (source_attnum > 0),
    trigger_name   name NOT NULL,
    enabled        boolean NOT NULL DEFAULT true,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_name, attnum)
);
COMMENT ON TABLE @extschema@.claimed_attributes IS 'Columns claimed at the claims store, by attribute number';

CREATE VIEW @extschema@.claimed_columns AS
SELECT c.table_name, a.attname AS column_name, c.bucket_type, c.subject_type,
       s.attname AS subject_column, c.source_type, k.attname AS source_column,
       c.enabled, c.trigger_name, c.created_at, c.updated_at
  FROM @extschema@.claimed_attributes c
  JOIN pg_catalog.pg_attribute a ON a.attrelid = c.table_name AND a.attnum = c.attnum
  JOIN pg_catalog.pg_attribute s ON s.attrelid = c.table_name AND s.attnum = c.subject_attnum
  JOIN pg_catalog.pg_attribute k ON k.attrelid = c.table_name AND k.attnum = c.source_attnum;
COMMENT ON VIEW @extschema@.claimed_columns IS 'Columns claimed at the claims store, with their current names';

-- One row per lease whose outcome at the store is not settled yet,
-- written by the local transaction that took the lease.
CREATE TABLE @extschema@.outstanding_leases (
    uuid       uuid PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE @extschema@.outstanding_leases IS 'Leases taken at the store whose commit or rollback is not confirmed';

SELECT pg_catalog.pg_extension_config_dump('@extschema@.configuration', '');
SELECT pg_catalog.pg_extension_config_dump('@extschema@.claimed_attributes', '');
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

-- DROP TABLE or DROP COLUMN of a claimed column forgets its declaration
-- (its values stay claimed at the store). SECURITY DEFINER: it runs for
-- every role's DDL and only the extension's owner may write the table.
CREATE FUNCTION @extschema@.forget_dropped()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    gone record;
BEGIN
    -- DROP EXTENSION drops the table itself
    IF pg_catalog.to_regclass('@extschema@.claimed_attributes') IS NULL THEN
        RETURN;
    END IF;
    FOR gone IN
        DELETE FROM @extschema@.claimed_attributes c
         USING pg_catalog.pg_event_trigger_dropped_objects() d
         WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
           AND d.objid = c.table_name
           AND d.objsubid IN (0, c.attnum, c.subject_attnum, c.source_attnum)
        RETURNING c.table_name, c.attnum, c.trigger_name, d.objsubid, d.object_identity
    LOOP
        IF gone.objsubid <> 0 THEN
            -- a column of a table that stays: its trigger would fail
            EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS %I ON %s',
                                      gone.trigger_name, gone.table_name);
            IF NOT EXISTS (SELECT 1 FROM @extschema@.claimed_attributes c
                            WHERE c.table_name = gone.table_name) THEN
                EXECUTE pg_catalog.format('DROP TRIGGER IF EXISTS claims_cell_truncate ON %s',
                                          gone.table_name);
            END IF;
            RAISE NOTICE 'a column of table % is no longer claimed: column % was dropped',
                gone.table_name, gone.object_identity;
        END IF;
    END LOOP;
END
$$;

CREATE EVENT TRIGGER claims_cell_forget_dropped ON sql_drop
    EXECUTE FUNCTION @extschema@.forget_dropped();

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

REVOKE ALL ON TABLE @extschema@.configuration, @extschema@.claimed_attributes,
    @extschema@.claimed_columns, @extschema@.outstanding_leases FROM PUBLIC;
REVOKE ALL ON FUNCTION @extschema@.configure(name, bigint),
    @extschema@.claim_column(regclass, name, text, text, name, text),
    @extschema@.set_claiming(regclass, name, boolean),
    @extschema@.unclaim_column(regclass, name),
    @extschema@.forget_dropped(), @extschema@.stats(),
    @extschema@.collect(), @extschema@.refuse_truncate(),
    @extschema@.store_validator(text[], oid) FROM PUBLIC;
REVOKE ALL ON @extschema@.stats FROM PUBLIC;
GRANT USAGE ON SCHEMA @extschema@ TO pg_monitor;
GRANT EXECUTE ON FUNCTION @extschema@.stats() TO pg_monitor;
GRANT SELECT ON @extschema@.stats TO pg_monitor;
