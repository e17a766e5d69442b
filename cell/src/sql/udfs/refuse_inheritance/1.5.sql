-- ---------------------------------------------------------------------------
-- A claimed table never gets inheritance children: a child's rows are rows
-- of its parent (SELECT FROM parent shows them), and the parent's claim
-- triggers do not fire for them. The event trigger refuses a command that
-- makes one of its tables inherit from a claimed table; claim_column
-- refuses a table that has children.
-- ---------------------------------------------------------------------------
CREATE FUNCTION @extschema@.refuse_inheritance()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'claims_cell_refuse_inheritance'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.refuse_inheritance() FROM PUBLIC;
COMMENT ON FUNCTION @extschema@.refuse_inheritance() IS
    'Event trigger: refuse inheritance children of a table with claimed columns';
