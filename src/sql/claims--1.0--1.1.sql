/* claims--1.0--1.1.sql: built-in registry rows become read-only; disabling a
 * cell waits for its begin_updates in progress. */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.1'" to load this file. \quit

#include "udfs/claims_builtin_types_guard/1.1.sql"

CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_bucket_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('bucket type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_bucket_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('bucket type');
CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_subject_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('subject type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_subject_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('subject type');
CREATE TRIGGER claims_builtin_types_guard
    BEFORE INSERT OR UPDATE OR DELETE ON @extschema@.claim_source_types
    FOR EACH ROW EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('source type');
CREATE TRIGGER claims_builtin_types_guard_truncate
    BEFORE TRUNCATE ON @extschema@.claim_source_types
    FOR EACH STATEMENT EXECUTE FUNCTION @extschema@.claims_builtin_types_guard('source type');

#include "udfs/claims_set_cell_disabled/1.1.sql"
