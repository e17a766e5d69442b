/* claims--1.2--1.3.sql: every function re-created whole, with its comment and privileges. */

\echo Use "ALTER EXTENSION claims UPDATE TO '1.3'" to load this file. \quit

-- Until 1.2 the comments and privileges of most functions were given apart
-- from their definitions, a group at a time. 1.3 changes no function: each
-- is created again as it is, with its COMMENT, REVOKE and GRANT beside it,
-- so that udfs/NAME/latest.sql is the whole current definition.

#include "udfs/claims_registry_changed/1.3.sql"

#include "udfs/claims_begin_update/1.3.sql"

#include "udfs/claims_commit.bigint_uuid/1.3.sql"

#include "udfs/claims_rollback.bigint_uuid/1.3.sql"

#include "udfs/claims_get_record/1.3.sql"

#include "udfs/claims_list_leases/1.3.sql"

#include "udfs/claims_list_records/1.3.sql"

#include "udfs/claims_require_admin/1.3.sql"

#include "udfs/claims_caller/1.3.sql"

#include "udfs/claims_lock_cell/1.3.sql"

#include "udfs/claims_audit/1.3.sql"

#include "udfs/claims_register_cell/1.3.sql"

#include "udfs/claims_rename_cell/1.3.sql"

#include "udfs/claims_set_cell_disabled/1.3.sql"

#include "udfs/claims_admin_finish_lease/1.3.sql"

#include "udfs/claims_decommission_cell/1.3.sql"

#include "udfs/claims_check/1.3.sql"

#include "udfs/claims_stats/1.3.sql"

#include "udfs/claims_stats_reset/1.3.sql"

#include "udfs/claims_commit.jsonb/1.3.sql"

#include "udfs/claims_rollback.jsonb/1.3.sql"

#include "udfs/claims_get_cells/1.3.sql"

#include "udfs/claims_set_cell_info/1.3.sql"

#include "udfs/claims_stats_by_cell/1.3.sql"

#include "udfs/claims_stats_by_bucket_type/1.3.sql"
