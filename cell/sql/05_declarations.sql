-- Declarations follow the table: RENAME keeps them (attribute numbers),
-- DROP TABLE and DROP COLUMN forget them. Without a store the rows and
-- triggers claim_column would write are written here by hand.
\set VERBOSITY terse
CREATE TABLE members (id bigint PRIMARY KEY, login text, email text, note text);
CREATE ROLE regress_owner;
GRANT USAGE, CREATE ON SCHEMA public TO regress_owner;
-- write what claim_column writes for a column
CREATE FUNCTION declare_claim(t regclass, col name, trig name) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    a smallint := (SELECT attnum FROM pg_attribute WHERE attrelid = t AND attname = col);
BEGIN
    INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type, subject_type,
        subject_attnum, source_type, source_attnum, trigger_name)
    VALUES (t, a, 'USERNAMES', 'USER', 1, 'RAILS_TABLE_USERS', 1, trig);
    EXECUTE format('CREATE TRIGGER %I AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH ROW'
                   ' EXECUTE FUNCTION claims_cell.collect(%L, ''USERNAMES'', ''USER'', ''1'','
                   ' ''RAILS_TABLE_USERS'', ''1'', ''f'')', trig, t, a);
    IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = t AND tgname = 'claims_cell_truncate') THEN
        EXECUTE format('CREATE TRIGGER claims_cell_truncate BEFORE TRUNCATE ON %s'
                       ' FOR EACH STATEMENT EXECUTE FUNCTION claims_cell.refuse_truncate()', t);
    END IF;
END $$;
SELECT declare_claim('members', 'login', 'claims_cell_login');
SELECT declare_claim('members', 'email', 'claims_cell_email');
SELECT table_name, column_name, subject_column, source_column, trigger_name
  FROM claims_cell.claimed_columns ORDER BY 2;
-- RENAME COLUMN and RENAME TABLE: the view shows the new names
ALTER TABLE members RENAME COLUMN login TO username;
ALTER TABLE members RENAME COLUMN id TO member_id;
ALTER TABLE members RENAME TO people;
SELECT table_name, column_name, subject_column, source_column, trigger_name
  FROM claims_cell.claimed_columns ORDER BY 2;
-- the trigger still finds its column: a too long value fails at the statement
-- under the column's new name; NULLs claim nothing
INSERT INTO people VALUES (1, repeat('x', 1025));
INSERT INTO people VALUES (1, NULL, NULL, 'n');
-- set_claiming and unclaim_column name the column by its new name
SELECT claims_cell.set_claiming('people', 'login', false);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.set_claiming('people', 'note', false);
\echo :LAST_ERROR_SQLSTATE
SELECT claims_cell.set_claiming('people', 'username', false);
SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = 'people'::regclass ORDER BY 1;
SELECT claims_cell.set_claiming('people', 'username', true);
-- DROP COLUMN of a claimed column forgets it and drops its trigger
ALTER TABLE people DROP COLUMN email;
SELECT column_name FROM claims_cell.claimed_columns;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'people'::regclass ORDER BY 1;
INSERT INTO people VALUES (2, NULL, 'still writable');
-- dropping an unclaimed column changes nothing
ALTER TABLE people DROP COLUMN note;
SELECT count(*) FROM claims_cell.claimed_attributes;
-- DROP TABLE forgets its declarations
DROP TABLE people;
SELECT count(*) FROM claims_cell.claimed_attributes;
-- also when a role without access to the extension's tables drops its own table
SET ROLE regress_owner;
CREATE TABLE owned (id bigint PRIMARY KEY, handle text);
RESET ROLE;
SELECT declare_claim('owned', 'handle', 'claims_cell_handle');
SET ROLE regress_owner;
DROP TABLE owned;
RESET ROLE;
SELECT count(*) FROM claims_cell.claimed_attributes;
-- the last claimed column dropped takes the TRUNCATE guard with it
CREATE TABLE solo (id bigint PRIMARY KEY, handle text, other text);
SELECT declare_claim('solo', 'handle', 'claims_cell_handle');
ALTER TABLE solo DROP COLUMN handle;
SELECT tgname FROM pg_trigger WHERE tgrelid = 'solo'::regclass;
TRUNCATE solo;
DROP TABLE solo;
DROP FUNCTION declare_claim(regclass, name, name);
REVOKE ALL ON SCHEMA public FROM regress_owner;
DROP ROLE regress_owner;
