-- verify(): its settings, its errors (each changes nothing), its privileges,
-- and the worker's schedule table. The comparison itself needs a store:
-- cell/test/t/011_verify.pl.
\set VERBOSITY terse
SHOW claims_cell.verify_recent;
SHOW claims_cell.verify_interval;
SET claims_cell.verify_interval = '1h';
CREATE ROLE regress_verify_app IN ROLE pg_monitor;
SET ROLE regress_verify_app;
SET claims_cell.verify_recent = 0;
SELECT * FROM claims_cell.verify('pg_class');
SELECT * FROM claims_cell.verify_due();
SELECT count(*) FROM claims_cell.verify_progress;
RESET ROLE;
-- two tables declared by hand (claim_column needs the store), one key type each
CREATE TABLE handles (id bigint PRIMARY KEY, handle text, paused text);
CREATE TABLE nicknames (id uuid PRIMARY KEY, nick text, uid bigint);
INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type, subject_type,
    subject_attnum, source_type, source_attnum, trigger_name, enabled)
VALUES ('handles', 2, 'USERNAMES', 'USER', 1, 'RAILS_TABLE_USERS', 1, 'claims_cell_handle', true),
       ('handles', 3, 'ROUTES', 'USER', 1, 'RAILS_TABLE_USERS', 1, 'claims_cell_paused', false),
       ('nicknames', 2, 'USERNAMES', 'USER', 3, 'RAILS_TABLE_USERS', 1, 'claims_cell_nick', true);
-- NULL arguments
SELECT * FROM claims_cell.verify(NULL);
SELECT * FROM claims_cell.verify('handles', NULL);
-- a table without claimed columns
SELECT * FROM claims_cell.verify('pg_class');
-- the same bucket type and source type claimed by two tables: not told apart at the store
SELECT * FROM claims_cell.verify('handles');
UPDATE claims_cell.claimed_attributes SET source_type = 'RAILS_TABLE_NAMESPACES'
 WHERE table_name = 'nicknames'::regclass;
-- every claimed column paused: nothing to verify
UPDATE claims_cell.claimed_attributes SET enabled = false WHERE table_name = 'nicknames'::regclass;
SELECT * FROM claims_cell.verify('nicknames');
-- each batch must see the rows committed now
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM claims_cell.verify('handles');
ROLLBACK;
-- the store cannot be reached: an error, nothing repaired, no lease row
INSERT INTO handles VALUES (1, 'someone', NULL);
DO $$
BEGIN
    PERFORM claims_cell.verify('handles', repair => true);
EXCEPTION WHEN OTHERS THEN
    RAISE NOTICE 'verify failed with SQLSTATE %', SQLSTATE;
END $$;
SELECT count(*) FROM claims_cell.outstanding_leases;
-- the worker's schedule: a row per claimed table, not due yet
SELECT * FROM claims_cell.verify_due();
SELECT table_name, run_started_at, resume_after, last_finished_at, missing
  FROM claims_cell.verify_progress ORDER BY 1;
-- DROP TABLE forgets its progress with its declarations
DROP TABLE handles;
SELECT count(*) FROM claims_cell.verify_progress;
DROP TABLE nicknames;
SELECT count(*) FROM claims_cell.claimed_attributes;
-- no worker verified anything here
SELECT verify_runs, verify_missing, verify_extra, verify_drifted, verify_repaired, last_verify
  FROM claims_cell.stats;
DROP ROLE regress_verify_app;
