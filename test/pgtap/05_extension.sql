-- The extension as a whole: version, control flags, member objects and
-- their schema, pg_dump configuration.
BEGIN;
SELECT plan(27);

SELECT has_extension('claims');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'claims'), '1.3',
    'claims is installed at version 1.3');
SELECT is((SELECT default_version FROM pg_available_extensions WHERE name = 'claims'), '1.3',
    'the default version of claims is 1.3');

-- Not relocatable.
SELECT is((SELECT extrelocatable FROM pg_extension WHERE extname = 'claims'), false,
    'the installed extension is not relocatable');
SELECT results_eq(
    $$SELECT version, relocatable, superuser, trusted FROM pg_available_extension_versions
       WHERE name = 'claims' ORDER BY version$$,
    $$VALUES ('1.0'::text, false, true, false), ('1.1', false, true, false), ('1.2', false, true, false),
             ('1.3', false, true, false)$$,
    'claims 1.0, 1.1, 1.2 and 1.3 are not relocatable, need a superuser to install and are not trusted');
CREATE SCHEMA claims_moved;
SELECT throws_ok($$ALTER EXTENSION claims SET SCHEMA claims_moved$$,
    '0A000', 'extension "claims" does not support SET SCHEMA',
    'ALTER EXTENSION claims SET SCHEMA is refused');
SELECT is_empty(
    $$SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
       WHERE n.nspname = 'claims_moved'$$,
    'nothing was moved by the refused SET SCHEMA');

-- Member objects and their schema.
SELECT set_eq(
    $$SELECT c.relname::text COLLATE "default"
        FROM pg_depend d JOIN pg_class c ON c.oid = d.objid
       WHERE d.classid = 'pg_class'::regclass AND d.deptype = 'e' AND c.relkind IN ('r', 'p', 'S')
         AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims')$$,
    ARRAY['claims', 'claim_leases', 'claim_bucket_types', 'claim_subject_types', 'claim_source_types',
          'claim_cells', 'claim_admin_actions', 'claim_admin_actions_action_id_seq'],
    'the extension owns exactly the seven tables and the audit log''s sequence');
-- The types the extension creates itself: PostgreSQL 17 also records the
-- row types of its tables and views and every implicit array type as
-- members, which are left out here (their relations are counted above).
SELECT set_eq(
    $$SELECT t.typname::text COLLATE "default"
        FROM pg_depend d JOIN pg_type t ON t.oid = d.objid
       WHERE d.classid = 'pg_type'::regclass AND d.deptype = 'e'
         AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims')
         AND t.typrelid = 0
         AND NOT EXISTS (SELECT 1 FROM pg_type e WHERE e.typarray = t.oid)$$,
    ARRAY['claim_status', 'claim_lease_state'],
    'the extension owns exactly the two enum types');
SELECT ok(
    (SELECT count(*) FROM pg_depend d JOIN pg_proc p ON p.oid = d.objid
      WHERE d.classid = 'pg_proc'::regclass AND d.deptype = 'e'
        AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims')
        AND p.oid IN ('claims_begin_update(jsonb)'::regprocedure, 'claims_commit(bigint,uuid)'::regprocedure,
                      'claims_rollback(bigint,uuid)'::regprocedure, 'claims_get_record(jsonb)'::regprocedure,
                      'claims_list_leases(jsonb)'::regprocedure, 'claims_list_records(jsonb)'::regprocedure,
                      'claims_commit(jsonb)'::regprocedure, 'claims_rollback(jsonb)'::regprocedure,
                      'claims_get_cells(jsonb)'::regprocedure,
                      'claims_registry_changed()'::regprocedure,
                      'claims_builtin_types_guard()'::regprocedure)) = 11,
    'the nine API functions and the two registry trigger functions belong to the extension');

SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'claims'), 'public',
    'CREATE EXTENSION without SCHEMA installs claims in public');
SELECT is_empty(
    $$SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
        FROM pg_depend d
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
        LEFT JOIN pg_class c ON d.classid = 'pg_class'::regclass AND c.oid = d.objid
        LEFT JOIN pg_type t ON d.classid = 'pg_type'::regclass AND t.oid = d.objid
        LEFT JOIN pg_proc p ON d.classid = 'pg_proc'::regclass AND p.oid = d.objid
       WHERE d.deptype = 'e'
         AND d.classid IN ('pg_class'::regclass, 'pg_type'::regclass, 'pg_proc'::regclass)
         AND coalesce(c.relnamespace, t.typnamespace, p.pronamespace) IS DISTINCT FROM e.extnamespace$$,
    'every table, type and function of the extension lives in the extension''s schema');
SELECT is_empty(
    $$SELECT i.indexrelid::regclass FROM pg_index i
        JOIN pg_class t ON t.oid = i.indrelid JOIN pg_class x ON x.oid = i.indexrelid
       WHERE t.oid IN ('claims'::regclass, 'claim_leases'::regclass, 'claim_bucket_types'::regclass,
                       'claim_subject_types'::regclass, 'claim_source_types'::regclass)
         AND x.relnamespace <> t.relnamespace$$,
    'indexes live with their tables');
SELECT is_empty(
    $$SELECT pg_describe_object(d.classid, d.objid, d.objsubid)
        FROM pg_depend d
        JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
       WHERE d.deptype = 'e'
         AND d.classid IN ('pg_class'::regclass, 'pg_proc'::regclass)
         AND NOT (d.classid = 'pg_class'::regclass
                  AND (SELECT c.relkind FROM pg_class c WHERE c.oid = d.objid) = 'S')
         AND obj_description(d.objid, d.classid::regclass::name) IS NULL
         AND NOT (d.classid = 'pg_proc'::regclass
                  AND d.objid = 'claims_registry_changed()'::regprocedure)$$,
    'every table, view and function of the extension, but the trigger function, has a comment');

-- pg_dump: the seven tables (and the audit log's sequence) are configuration
-- tables; registries keep only the rows an operator added, the cells and the
-- audit log are dumped whole.
SELECT set_eq(
    $$SELECT unnest(extconfig)::regclass::text COLLATE "default" FROM pg_extension WHERE extname = 'claims'$$,
    ARRAY['claims', 'claim_leases', 'claim_bucket_types', 'claim_subject_types', 'claim_source_types',
          'claim_cells', 'claim_admin_actions', 'claim_admin_actions_action_id_seq'],
    'pg_extension.extconfig lists the seven tables and the audit log''s sequence');
SELECT results_eq(
    $$SELECT c.relid::regclass::text COLLATE "default", c.cond COLLATE "default"
        FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS c(relid, cond)
       WHERE e.extname = 'claims' ORDER BY 1$$,
    $$VALUES ('claim_admin_actions'::text, ''::text),
             ('claim_admin_actions_action_id_seq', ''),
             ('claim_bucket_types', 'WHERE NOT builtin'),
             ('claim_cells', ''),
             ('claim_leases', ''),
             ('claim_source_types', 'WHERE NOT builtin'),
             ('claim_subject_types', 'WHERE NOT builtin'),
             ('claims', '')$$,
    'claims, claim_leases, claim_cells and the audit log are dumped whole, registries WHERE NOT builtin');
SELECT is(
    (SELECT cardinality(extconfig) = cardinality(extcondition) FROM pg_extension WHERE extname = 'claims'),
    true,
    'extconfig and extcondition have one entry per table');

-- The dump conditions select what they should.
INSERT INTO claim_bucket_types (type_id, name) VALUES (40, 'WIDGETS');
INSERT INTO claim_subject_types (type_id, name) VALUES (40, 'ROBOT');
INSERT INTO claim_source_types (type_id, name) VALUES (40, 'RAILS_TABLE_WIDGETS');
SELECT results_eq(
    $$SELECT 'bucket'::text, type_id FROM claim_bucket_types WHERE NOT builtin
      UNION ALL SELECT 'subject', type_id FROM claim_subject_types WHERE NOT builtin
      UNION ALL SELECT 'source', type_id FROM claim_source_types WHERE NOT builtin
      ORDER BY 1$$,
    $$VALUES ('bucket'::text, 40), ('source', 40), ('subject', 40)$$,
    'the dump condition selects exactly the rows an operator added');

-- Dropping the extension removes all of it (undone by the final ROLLBACK).
SELECT lives_ok($$DROP EXTENSION claims$$, 'DROP EXTENSION claims succeeds');
SELECT is_empty(
    $$SELECT c.relname FROM pg_class c
       WHERE c.relname IN ('claims', 'claim_leases', 'claim_bucket_types', 'claim_subject_types',
                           'claim_source_types', 'claim_cells', 'claim_admin_actions',
                           'claim_admin_actions_action_id_seq', 'claims_outstanding_leases',
                           'claims_stale_leases', 'claims_stats', 'claims_stats_by_cell',
                           'claims_stats_by_bucket_type', 'claims_oldest_leases')
      UNION ALL
      SELECT t.typname FROM pg_type t WHERE t.typname IN ('claim_status', 'claim_lease_state')
      UNION ALL
      SELECT p.proname FROM pg_proc p WHERE p.proname LIKE 'claims\_%'$$,
    'DROP EXTENSION leaves no table, view, sequence, type or function behind');
SELECT set_eq(
    $$SELECT rolname::text COLLATE "default" FROM pg_roles
       WHERE rolname IN ('claims_admin', 'claims_router', 'claims_cell')$$,
    ARRAY['claims_admin', 'claims_router', 'claims_cell'],
    'DROP EXTENSION keeps the cluster-wide roles claims_admin, claims_router and claims_cell');
SELECT lives_ok($$CREATE EXTENSION claims$$,
    'CREATE EXTENSION claims succeeds again with the roles already there');

-- 1.0 updates to the current version through 1.1, which adds the guard of
-- the built-in registry rows (CREATE EXTENSION takes the same path: there is
-- no claims--1.1.sql, claims--1.2.sql or claims--1.3.sql).
SELECT lives_ok($$DROP EXTENSION claims; CREATE EXTENSION claims VERSION '1.0'$$,
    'claims 1.0 can be installed');
SELECT is_empty(
    $$SELECT tgname FROM pg_trigger WHERE tgname LIKE 'claims\_builtin%'
      UNION ALL SELECT proname FROM pg_proc WHERE proname = 'claims_builtin_types_guard'$$,
    'claims 1.0 has no guard of the built-in registry rows');
SELECT lives_ok($$ALTER EXTENSION claims UPDATE$$, 'ALTER EXTENSION claims UPDATE succeeds');
SELECT is((SELECT extversion FROM pg_extension WHERE extname = 'claims'), '1.3',
    'the update leaves claims at version 1.3');
SELECT results_eq(
    $$SELECT tgrelid::regclass::text, count(*)::integer FROM pg_trigger
       WHERE tgname LIKE 'claims\_builtin\_types\_guard%' GROUP BY 1 ORDER BY 1$$,
    $$VALUES ('claim_bucket_types'::text, 2), ('claim_source_types', 2), ('claim_subject_types', 2)$$,
    'the update adds the guard triggers to the three registries');

SELECT * FROM finish();
ROLLBACK;
