-- Schema of the claims extension: tables, columns, keys, indexes, check
-- constraints (declared and enforced), enum types and triggers.
BEGIN;
SELECT plan(84);

-- Tables ------------------------------------------------------------------

SELECT has_table('claims');
SELECT has_table('claim_leases');
SELECT has_table('claim_bucket_types');
SELECT has_table('claim_subject_types');
SELECT has_table('claim_source_types');
SELECT has_table('claim_cells');
SELECT has_table('claim_admin_actions');

-- Columns: name, type, NOT NULL and default, in table order ---------------

SELECT columns_are('claims', ARRAY[
    'uuid', 'bucket_type', 'bucket_value', 'bucket_digest', 'subject_type',
    'subject_id', 'source_type', 'source_id', 'user_data', 'creator_id',
    'lease_uuid', 'status', 'replace_subject_type', 'replace_subject_id',
    'replace_source_type', 'replace_source_id', 'replace_user_data',
    'created_at', 'updated_at']);

SELECT results_eq(
    $$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod), a.attnotnull,
             pg_get_expr(d.adbin, d.adrelid) COLLATE "default"
        FROM pg_attribute a
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = 'claims'::regclass AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum$$,
    $$VALUES ('uuid'::text, 'uuid'::text, true, NULL::text),
             ('bucket_type', 'integer', true, NULL),
             ('bucket_value', 'text', true, NULL),
             ('bucket_digest', 'bytea', true, NULL),
             ('subject_type', 'integer', true, NULL),
             ('subject_id', 'bigint', true, NULL),
             ('source_type', 'integer', true, NULL),
             ('source_id', 'bytea', true, NULL),
             ('user_data', 'jsonb', false, NULL),
             ('creator_id', 'bigint', true, NULL),
             ('lease_uuid', 'uuid', false, NULL),
             ('status', 'claim_status', true, NULL),
             ('replace_subject_type', 'integer', false, NULL),
             ('replace_subject_id', 'bigint', false, NULL),
             ('replace_source_type', 'integer', false, NULL),
             ('replace_source_id', 'bytea', false, NULL),
             ('replace_user_data', 'jsonb', false, NULL),
             ('created_at', 'timestamp with time zone', true, 'now()'),
             ('updated_at', 'timestamp with time zone', true, 'now()')$$,
    'claims columns have the expected types, NOT NULL and defaults');

SELECT is(
    (SELECT c.collname::text COLLATE "default" FROM pg_attribute a JOIN pg_collation c ON c.oid = a.attcollation
      WHERE a.attrelid = 'claims'::regclass AND a.attname = 'bucket_value'),
    'C',
    'claims.bucket_value uses the "C" collation');

SELECT columns_are('claim_leases', ARRAY[
    'uuid', 'creator_id', 'payload', 'state', 'claim_types', 'claim_digests', 'creates_only',
    'created_at', 'updated_at', 'finished_at', 'finished_by', 'finish_reason']);

SELECT results_eq(
    $$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod), a.attnotnull,
             pg_get_expr(d.adbin, d.adrelid) COLLATE "default"
        FROM pg_attribute a
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = 'claim_leases'::regclass AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum$$,
    $$VALUES ('uuid'::text, 'uuid'::text, true, NULL::text),
             ('creator_id', 'bigint', true, NULL),
             ('payload', 'jsonb', true, NULL),
             ('state', 'claim_lease_state', true, '''outstanding''::claim_lease_state'),
             ('claim_types', 'integer[]', true, NULL),
             ('claim_digests', 'bytea[]', true, NULL),
             ('creates_only', 'boolean', true, 'false'),
             ('created_at', 'timestamp with time zone', true, 'now()'),
             ('updated_at', 'timestamp with time zone', true, 'now()'),
             ('finished_at', 'timestamp with time zone', false, NULL),
             ('finished_by', 'text', false, NULL),
             ('finish_reason', 'text', false, NULL)$$,
    'claim_leases columns have the expected types, NOT NULL and defaults');

SELECT columns_are('claim_bucket_types', ARRAY[
    'type_id', 'name', 'claim_field', 'integer_valued', 'aliases', 'builtin']);

SELECT results_eq(
    $$SELECT a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod), a.attnotnull,
             pg_get_expr(d.adbin, d.adrelid) COLLATE "default"
        FROM pg_attribute a
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid = 'claim_bucket_types'::regclass AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY a.attnum$$,
    $$VALUES ('type_id'::text, 'integer'::text, true, NULL::text),
             ('name', 'text', true, NULL),
             ('claim_field', 'text', false, NULL),
             ('integer_valued', 'boolean', true, 'false'),
             ('aliases', 'text[]', true, '''{}''::text[]'),
             ('builtin', 'boolean', true, 'false')$$,
    'claim_bucket_types columns have the expected types, NOT NULL and defaults');

SELECT columns_are('claim_cells', ARRAY[
    'cell_id', 'name', 'role_name', 'disabled', 'created_at', 'updated_at',
    'address', 'session_prefix', 'sequence_ranges']);
SELECT columns_are('claim_admin_actions', ARRAY[
    'action_id', 'at', 'actor', 'session_role', 'action', 'cell_id', 'lease_uuid', 'reason', 'detail']);

SELECT columns_are('claim_subject_types', ARRAY['type_id', 'name', 'aliases', 'builtin']);
SELECT columns_are('claim_source_types', ARRAY['type_id', 'name', 'aliases', 'builtin']);

SELECT results_eq(
    $$SELECT c.relname::text COLLATE "default", a.attname::text COLLATE "default", format_type(a.atttypid, a.atttypmod),
             a.attnotnull, pg_get_expr(d.adbin, d.adrelid) COLLATE "default"
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
       WHERE a.attrelid IN ('claim_subject_types'::regclass, 'claim_source_types'::regclass)
         AND a.attnum > 0 AND NOT a.attisdropped
       ORDER BY c.relname, a.attnum$$,
    $$VALUES ('claim_source_types'::text, 'type_id'::text, 'integer'::text, true, NULL::text),
             ('claim_source_types', 'name', 'text', true, NULL),
             ('claim_source_types', 'aliases', 'text[]', true, '''{}''::text[]'),
             ('claim_source_types', 'builtin', 'boolean', true, 'false'),
             ('claim_subject_types', 'type_id', 'integer', true, NULL),
             ('claim_subject_types', 'name', 'text', true, NULL),
             ('claim_subject_types', 'aliases', 'text[]', true, '''{}''::text[]'),
             ('claim_subject_types', 'builtin', 'boolean', true, 'false')$$,
    'subject and source registry columns have the expected types, NOT NULL and defaults');

-- Primary and unique keys ---------------------------------------------------

SELECT col_is_pk('claims', 'uuid');
SELECT col_is_pk('claim_leases', 'uuid');
SELECT col_is_pk('claim_bucket_types', 'type_id');
SELECT col_is_pk('claim_subject_types', 'type_id');
SELECT col_is_pk('claim_source_types', 'type_id');

SELECT col_is_unique('claims', ARRAY['bucket_type', 'bucket_digest'],
    'claims has a unique key on (bucket_type, bucket_digest)');
SELECT is(
    (SELECT conname::text COLLATE "default" FROM pg_constraint
      WHERE conrelid = 'claims'::regclass AND contype = 'u'),
    'claims_bucket_key',
    'the unique key of claims is the constraint claims_bucket_key');
SELECT col_is_unique('claim_bucket_types', 'name');
SELECT col_is_unique('claim_bucket_types', 'claim_field');
SELECT col_is_unique('claim_subject_types', 'name');
SELECT col_is_unique('claim_source_types', 'name');

-- Indexes -------------------------------------------------------------------

SELECT indexes_are('claims', ARRAY['claims_pkey', 'claims_bucket_key', 'claims_source_idx']);
SELECT has_index('claims', 'claims_bucket_key', ARRAY['bucket_type', 'bucket_digest']);
SELECT index_is_unique('claims', 'claims_bucket_key');
SELECT has_index('claims', 'claims_source_idx',
    ARRAY['creator_id', 'source_type', 'source_id', 'bucket_type', 'bucket_digest']);
SELECT index_is_type('claims', 'claims_source_idx', 'btree');

SELECT indexes_are('claim_leases',
    ARRAY['claim_leases_pkey', 'claim_leases_outstanding_idx', 'claim_leases_finished_idx']);
SELECT has_index('claim_leases', 'claim_leases_outstanding_idx',
    ARRAY['creator_id', 'created_at', 'uuid']);
SELECT has_index('claim_leases', 'claim_leases_finished_idx', ARRAY['finished_at']);
SELECT results_eq(
    $$SELECT c.relname::text COLLATE "default", pg_get_expr(i.indpred, i.indrelid) COLLATE "default"
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
       WHERE i.indrelid = 'claim_leases'::regclass AND i.indpred IS NOT NULL
       ORDER BY 1$$,
    $$VALUES ('claim_leases_finished_idx'::text,
              '(state <> ''outstanding''::claim_lease_state)'::text),
             ('claim_leases_outstanding_idx',
              '(state = ''outstanding''::claim_lease_state)')$$,
    'the two claim_leases indexes are partial on the lease state');

SELECT is(
    (SELECT reloptions FROM pg_class WHERE oid = 'claims'::regclass),
    ARRAY['fillfactor=80'],
    'claims is created with fillfactor 80');

-- Check constraints: declared ------------------------------------------------

SELECT set_eq(
    $$SELECT conname::text COLLATE "default" FROM pg_constraint
       WHERE conrelid = 'claims'::regclass AND contype = 'c'$$,
    ARRAY['claims_creator_id_check', 'claims_digest_length', 'claims_source_id_length',
          'claims_lease_matches_status', 'claims_replace_only_while_destroying'],
    'claims has exactly the expected check constraints');

SELECT set_eq(
    $$SELECT conname::text COLLATE "default" FROM pg_constraint
       WHERE conrelid = 'claim_leases'::regclass AND contype = 'c'$$,
    ARRAY['claim_leases_creator_id_check', 'claim_leases_finished_when_done',
          'claim_leases_keys_match'],
    'claim_leases has exactly the expected check constraints');

SELECT set_eq(
    $$SELECT conrelid::regclass::text || '.' || conname::text COLLATE "default" FROM pg_constraint
       WHERE conrelid IN ('claim_bucket_types'::regclass, 'claim_subject_types'::regclass,
                          'claim_source_types'::regclass)
         AND contype = 'c'$$,
    ARRAY['claim_bucket_types.claim_bucket_types_type_id_check',
          'claim_bucket_types.claim_bucket_types_name_check',
          'claim_bucket_types.claim_bucket_types_claim_field_check',
          'claim_bucket_types.claim_bucket_types_aliases_check',
          'claim_subject_types.claim_subject_types_type_id_check',
          'claim_subject_types.claim_subject_types_name_check',
          'claim_subject_types.claim_subject_types_aliases_check',
          'claim_source_types.claim_source_types_type_id_check',
          'claim_source_types.claim_source_types_name_check',
          'claim_source_types.claim_source_types_aliases_check'],
    'the registries have exactly the expected check constraints');

-- Check constraints: enforced on claims (as superuser) ---------------------

-- A row that satisfies every constraint, so each failure below is caused by
-- the one column changed.
PREPARE claim_row(uuid, integer, text, bytea, bytea, bigint, uuid, claim_status,
                  integer, bigint, integer, bytea) AS
    INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type,
                        subject_id, source_type, source_id, creator_id, lease_uuid, status,
                        replace_subject_type, replace_subject_id, replace_source_type,
                        replace_source_id)
    VALUES ($1, $2, $3, $4, 4, 42, 1, $5, $6, $7, $8, $9, $10, $11, $12);

SELECT lives_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000001', 4, 'alice', sha256('alice'),
                        '\x01', 1, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    'a consistent ACTIVE claim without lease can be inserted');
SELECT lives_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000002', 4, 'bob', sha256('bob'),
                        '\x02', 1, '00000000-0000-4000-8000-0000000000aa', 'LEASE_CREATING',
                        NULL, NULL, NULL, NULL)$$,
    'a LEASE_CREATING claim with a lease can be inserted');
SELECT lives_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000003', 4, 'carol', sha256('carol'),
                        '\x03', 1, '00000000-0000-4000-8000-0000000000aa', 'LEASE_DESTROYING',
                        4, 43, 1, '\x04')$$,
    'a LEASE_DESTROYING claim carrying a full replacement can be inserted');

SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000010', 4, 'dave', sha256('dave'),
                        '\x01', 1, '00000000-0000-4000-8000-0000000000aa', 'ACTIVE',
                        NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_lease_matches_status"',
    'an ACTIVE claim with a lease violates claims_lease_matches_status');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000011', 4, 'dave', sha256('dave'),
                        '\x01', 1, NULL, 'LEASE_CREATING', NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_lease_matches_status"',
    'a LEASE_CREATING claim without a lease violates claims_lease_matches_status');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000012', 4, 'dave', sha256('dave'),
                        '\x01', 1, NULL, 'LEASE_DESTROYING', NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_lease_matches_status"',
    'a LEASE_DESTROYING claim without a lease violates claims_lease_matches_status');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000013', 4, 'dave',
                        substring(sha256('dave') from 2), '\x01', 1, NULL, 'ACTIVE',
                        NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_digest_length"',
    'a 31-byte digest violates claims_digest_length');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000014', 4, 'dave', sha256('dave'),
                        '\x', 1, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_source_id_length"',
    'an empty source_id violates claims_source_id_length');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000015', 4, 'dave', sha256('dave'),
                        decode(repeat('ab', 129), 'hex'), 1, NULL, 'ACTIVE',
                        NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_source_id_length"',
    'a 129-byte source_id violates claims_source_id_length');
SELECT lives_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000016', 4, 'erin', sha256('erin'),
                        decode(repeat('ab', 128), 'hex'), 1, NULL, 'ACTIVE',
                        NULL, NULL, NULL, NULL)$$,
    'a 128-byte source_id is accepted');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000017', 4, 'dave', sha256('dave'),
                        '\x01', 0, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    '23514', 'new row for relation "claims" violates check constraint "claims_creator_id_check"',
    'creator_id 0 violates claims_creator_id_check');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000018', 4, 'dave', sha256('dave'),
                        '\x01', 1, NULL, 'ACTIVE', 4, 43, 1, '\x04')$$,
    '23514',
    'new row for relation "claims" violates check constraint "claims_replace_only_while_destroying"',
    'a replacement on an ACTIVE claim violates claims_replace_only_while_destroying');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000019', 4, 'dave', sha256('dave'),
                        '\x01', 1, '00000000-0000-4000-8000-0000000000aa', 'LEASE_CREATING',
                        4, 43, 1, '\x04')$$,
    '23514',
    'new row for relation "claims" violates check constraint "claims_replace_only_while_destroying"',
    'a replacement on a LEASE_CREATING claim violates claims_replace_only_while_destroying');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-00000000001a', 4, 'dave', sha256('dave'),
                        '\x01', 1, '00000000-0000-4000-8000-0000000000aa', 'LEASE_DESTROYING',
                        4, 43, 1, NULL)$$,
    '23514',
    'new row for relation "claims" violates check constraint "claims_replace_only_while_destroying"',
    'a replacement without its source_id violates claims_replace_only_while_destroying');
SELECT throws_ok(
    $$UPDATE claims SET replace_user_data = '{}'
       WHERE uuid = '00000000-0000-4000-8000-000000000001'$$,
    '23514',
    'new row for relation "claims" violates check constraint "claims_replace_only_while_destroying"',
    'replace_user_data alone on an ACTIVE claim violates claims_replace_only_while_destroying');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-00000000001b', 4, 'other', sha256('alice'),
                        '\x01', 2, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    '23505', 'duplicate key value violates unique constraint "claims_bucket_key"',
    'a second claim with the same (bucket_type, bucket_digest) violates claims_bucket_key');
SELECT lives_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-00000000001c', 5, 'alice', sha256('alice'),
                        '\x01', 2, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    'the same digest under another bucket type is accepted');
SELECT throws_ok(
    $$EXECUTE claim_row('00000000-0000-4000-8000-000000000001', 6, '1', sha256('1'),
                        '\x01', 2, NULL, 'ACTIVE', NULL, NULL, NULL, NULL)$$,
    '23505', 'duplicate key value violates unique constraint "claims_pkey"',
    'a second claim with the same uuid violates claims_pkey');
SELECT throws_ok(
    $$INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type,
                          subject_id, source_type, source_id, creator_id)
      VALUES ('00000000-0000-4000-8000-00000000001d', 4, 'frank', sha256('frank'), 4, 1, 1,
              '\x01', 1)$$,
    '23502', NULL,
    'status has no default: a claim without status is rejected');

-- Check constraints: enforced on claim_leases (as superuser) ---------------

PREPARE lease_row(uuid, bigint, claim_lease_state, integer[], bytea[], timestamptz) AS
    INSERT INTO claim_leases (uuid, creator_id, payload, state, claim_types, claim_digests,
                              finished_at)
    VALUES ($1, $2, '{}', $3, $4, $5, $6);

SELECT lives_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b1', 1, 'outstanding',
                        '{4}', ARRAY[sha256('alice')], NULL)$$,
    'an outstanding lease without finished_at can be inserted');
SELECT lives_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b2', 1, 'committed',
                        '{4}', ARRAY[sha256('alice')], now())$$,
    'a committed lease with finished_at can be inserted');
SELECT throws_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b3', 1, 'outstanding',
                        '{4}', ARRAY[sha256('alice')], now())$$,
    '23514',
    'new row for relation "claim_leases" violates check constraint "claim_leases_finished_when_done"',
    'an outstanding lease with finished_at violates claim_leases_finished_when_done');
SELECT throws_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b4', 1, 'rolled_back',
                        '{4}', ARRAY[sha256('alice')], NULL)$$,
    '23514',
    'new row for relation "claim_leases" violates check constraint "claim_leases_finished_when_done"',
    'a rolled-back lease without finished_at violates claim_leases_finished_when_done');
SELECT throws_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b5', 1, 'outstanding',
                        '{4,5}', ARRAY[sha256('alice')], NULL)$$,
    '23514',
    'new row for relation "claim_leases" violates check constraint "claim_leases_keys_match"',
    'claim_types and claim_digests of different lengths violate claim_leases_keys_match');
SELECT throws_ok(
    $$EXECUTE lease_row('00000000-0000-4000-8000-0000000000b6', 0, 'outstanding',
                        '{4}', ARRAY[sha256('alice')], NULL)$$,
    '23514',
    'new row for relation "claim_leases" violates check constraint "claim_leases_creator_id_check"',
    'creator_id 0 violates claim_leases_creator_id_check');
SELECT is(
    (SELECT state FROM claim_leases WHERE uuid = '00000000-0000-4000-8000-0000000000b1'),
    'outstanding'::claim_lease_state,
    'an inserted lease defaults to state outstanding');

-- Enum types ------------------------------------------------------------------

SELECT has_enum('claim_status');
SELECT enum_has_labels('claim_status', ARRAY['ACTIVE', 'LEASE_CREATING', 'LEASE_DESTROYING']);
SELECT has_enum('claim_lease_state');
SELECT enum_has_labels('claim_lease_state', ARRAY['outstanding', 'committed', 'rolled_back']);
SELECT throws_ok(
    $$SELECT 'UNSPECIFIED'::claim_status$$,
    '22P02', NULL,
    'UNSPECIFIED is not a claim_status');

-- Triggers ------------------------------------------------------------------

SELECT triggers_are('claim_bucket_types', ARRAY['claims_registry_changed',
    'claims_builtin_types_guard', 'claims_builtin_types_guard_truncate']);
SELECT triggers_are('claim_subject_types', ARRAY['claims_registry_changed',
    'claims_builtin_types_guard', 'claims_builtin_types_guard_truncate']);
SELECT triggers_are('claim_source_types', ARRAY['claims_registry_changed',
    'claims_builtin_types_guard', 'claims_builtin_types_guard_truncate']);
-- claim_cells carries the same trigger: every backend's cached list of cells
-- follows registrations, renames and disabling at once.
SELECT triggers_are('claim_cells', ARRAY['claims_registry_changed']);
SELECT trigger_is('claim_bucket_types', 'claims_registry_changed', 'claims_registry_changed',
    'the trigger on claim_bucket_types calls claims_registry_changed()');
SELECT trigger_is('claim_subject_types', 'claims_registry_changed', 'claims_registry_changed',
    'the trigger on claim_subject_types calls claims_registry_changed()');
SELECT trigger_is('claim_source_types', 'claims_registry_changed', 'claims_registry_changed',
    'the trigger on claim_source_types calls claims_registry_changed()');
-- tgtype 60 = statement level, AFTER, INSERT (4) + DELETE (8) + UPDATE (16) + TRUNCATE (32).
SELECT results_eq(
    $$SELECT tgrelid::regclass::text, tgtype::integer, tgenabled::text
        FROM pg_trigger WHERE tgname = 'claims_registry_changed' ORDER BY 1$$,
    $$VALUES ('claim_bucket_types'::text, 60, 'O'::text),
             ('claim_cells', 60, 'O'),
             ('claim_source_types', 60, 'O'),
             ('claim_subject_types', 60, 'O')$$,
    'registry and cell triggers fire AFTER INSERT, UPDATE, DELETE and TRUNCATE, once per statement');
-- Built-in registry rows are read-only, as pg_dump does not keep them:
-- tgtype 31 = row level, BEFORE, INSERT + DELETE + UPDATE; 34 = statement
-- level, BEFORE, TRUNCATE. The argument names the kind of type in messages.
SELECT results_eq(
    $$SELECT tgrelid::regclass::text, tgname::text COLLATE "default", tgfoid::regproc::text, tgtype::integer,
             tgenabled::text, replace(encode(tgargs, 'escape'), '\000', '')
        FROM pg_trigger WHERE tgname LIKE 'claims\_builtin\_types\_guard%' ORDER BY 1, 2$$,
    $$VALUES ('claim_bucket_types'::text, 'claims_builtin_types_guard'::text,
              'claims_builtin_types_guard'::text, 31, 'O'::text, 'bucket type'::text),
             ('claim_bucket_types', 'claims_builtin_types_guard_truncate',
              'claims_builtin_types_guard', 34, 'O', 'bucket type'),
             ('claim_source_types', 'claims_builtin_types_guard',
              'claims_builtin_types_guard', 31, 'O', 'source type'),
             ('claim_source_types', 'claims_builtin_types_guard_truncate',
              'claims_builtin_types_guard', 34, 'O', 'source type'),
             ('claim_subject_types', 'claims_builtin_types_guard',
              'claims_builtin_types_guard', 31, 'O', 'subject type'),
             ('claim_subject_types', 'claims_builtin_types_guard_truncate',
              'claims_builtin_types_guard', 34, 'O', 'subject type')$$,
    'the registries guard their built-in rows BEFORE each row is inserted, updated or deleted, and BEFORE TRUNCATE');
SELECT is_empty(
    $$SELECT tgname FROM pg_trigger
       WHERE tgrelid IN ('claims'::regclass, 'claim_leases'::regclass)$$,
    'claims and claim_leases carry no triggers');

SELECT * FROM finish();
ROLLBACK;
