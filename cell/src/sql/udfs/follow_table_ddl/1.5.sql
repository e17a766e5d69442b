-- ---------------------------------------------------------------------------
-- DDL on tables, at ddl_command_end. A claimed table never gets
-- inheritance children: a child's rows are rows of its parent (SELECT
-- FROM parent shows them), and the parent's claim triggers do not fire
-- for them; a command that makes one of its tables inherit from a claimed
-- table is refused (claim_column refuses a table that has children). A
-- partition made or attached under a claimed partitioned table gets the
-- statement and TRUNCATE triggers its cloned row triggers need; a
-- detached one loses them.
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.follow_table_ddl()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'claims_cell_follow_table_ddl'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.follow_table_ddl() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.follow_table_ddl() IS
    'Event trigger: refuse inheritance children of a table with claimed columns, give partitions of a claimed table their triggers';
