-- Registry changes reach every backend's cached copy through a relcache
-- invalidation sent by this trigger.
CREATE OR REPLACE FUNCTION @extschema@.claims_registry_changed()
RETURNS trigger
AS 'MODULE_PATHNAME', 'claims_registry_changed'
LANGUAGE C;
REVOKE ALL ON FUNCTION @extschema@.claims_registry_changed() FROM PUBLIC;
