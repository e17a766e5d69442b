--
-- Setup shared by the whole suite: the extension and a few helpers that keep
-- the output deterministic.
--
CREATE EXTENSION claims;

-- The objects the extension installs.
SELECT e.extname, e.extversion, n.nspname AS schema, e.extrelocatable
FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
WHERE e.extname = 'claims';

SELECT o.object, EXISTS (SELECT 1 FROM pg_depend d
                          WHERE d.refclassid = 'pg_extension'::regclass
                            AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'claims')
                            AND d.deptype = 'e'
                            AND pg_describe_object(d.classid, d.objid, d.objsubid) = o.object) AS member
FROM (VALUES ('table claims'), ('table claim_leases'), ('table claim_bucket_types'),
             ('table claim_subject_types'), ('table claim_source_types'),
             ('type claim_status'), ('type claim_lease_state'),
             ('function claims_begin_update(jsonb)'), ('function claims_commit(bigint,uuid)'),
             ('function claims_rollback(bigint,uuid)'), ('function claims_get_record(jsonb)'),
             ('function claims_list_leases(jsonb)'), ('function claims_list_records(jsonb)'),
             ('table claim_cells'), ('table claim_admin_actions'),
             ('sequence claim_admin_actions_action_id_seq'), ('view claims_outstanding_leases'),
             ('function claims_register_cell(bigint,text,text,text)'),
             ('function claims_commit(jsonb)'), ('function claims_rollback(jsonb)'),
             ('function claims_get_cells(jsonb)'),
             ('function claims_set_cell_info(bigint,text,text,int8range[],text)')) AS o(object);
SELECT enum_range(NULL::claim_status) AS claim_status, enum_range(NULL::claim_lease_state) AS claim_lease_state;

-- The API functions: none is STRICT (NULL arguments must raise 22004); none
-- is SECURITY DEFINER (each judges the role that called it, then runs its
-- statements as the extension owner); all have a pinned search_path. PUBLIC
-- may not execute them: cells and administrators may, the router only
-- claims_get_record.
SELECT p.proname, pg_get_function_identity_arguments(p.oid) AS args,
       p.prorettype::regtype AS returns, p.proisstrict AS strict,
       p.prosecdef AS security_definer,
       p.proconfig
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
  AND p.proname IN ('claims_begin_update', 'claims_commit', 'claims_rollback',
                    'claims_get_record', 'claims_list_leases', 'claims_list_records',
                    'claims_get_cells')
ORDER BY p.proname;
SELECT p.proname,
       has_function_privilege('public', p.oid, 'EXECUTE') AS public,
       has_function_privilege('claims_cell', p.oid, 'EXECUTE') AS cell,
       has_function_privilege('claims_admin', p.oid, 'EXECUTE') AS admin,
       has_function_privilege('claims_router', p.oid, 'EXECUTE') AS router
FROM pg_proc p
WHERE p.pronamespace = 'public'::regnamespace
  AND p.proname IN ('claims_begin_update', 'claims_commit', 'claims_rollback',
                    'claims_get_record', 'claims_list_leases', 'claims_list_records',
                    'claims_get_cells')
ORDER BY p.proname;

-- Every call for a cell must name a registered cell, the superuser's too.
-- The suite runs as the superuser, an administrator, so the cells it uses
-- need only be registered (to a role of their own); ids no test registers
-- (such as 1201) stay refused.
CREATE ROLE regress_cells NOLOGIN;
-- (quiet: every registration after the first notes that the role is already
-- a member of claims_cell)
SET client_min_messages = warning;
SELECT count(claims_register_cell(id, 'cell-' || id, 'regress_cells')) AS registered
FROM generate_series(1, 1200) AS id;
RESET client_min_messages;
SELECT count(*) AS cells, min(cell_id), max(cell_id), bool_and(role_name = 'regress_cells') AS one_role,
       bool_or(disabled) AS any_disabled
FROM claim_cells;
SELECT pg_has_role('regress_cells', 'claims_cell', 'MEMBER') AS cells_role_is_a_cell;

-- The setting and its default.
SHOW claims.max_batch_size;
SELECT name, setting, min_val, max_val, context
FROM pg_settings WHERE name = 'claims.max_batch_size';

-- Helpers (not part of the extension).
--
-- claims_state(): a fingerprint of every row of claims and claim_leases, to
-- prove that a call wrote nothing.
-- claims_rows(): the row counts of both. (Both run as their owner, so that
-- expect_error works under any role.)
CREATE FUNCTION claims_state() RETURNS text
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT md5(coalesce((SELECT string_agg(c::text, '|' ORDER BY c.uuid) FROM claims c), '')
               || '#' ||
               coalesce((SELECT string_agg(l::text, '|' ORDER BY l.uuid) FROM claim_leases l), ''))
$$;
CREATE FUNCTION claims_rows() RETURNS bigint[]
LANGUAGE sql STABLE SECURITY DEFINER AS $$
    SELECT ARRAY[(SELECT count(*) FROM claims), (SELECT count(*) FROM claim_leases)]
$$;

-- expect_error(statement [, value, label]...): run a statement that must
-- fail. Prints its SQLSTATE, message, DETAIL and HINT as notices, and returns
-- whether anything was written (row counts of claims and claim_leases and the
-- fingerprint above, before and after). A statement that unexpectedly
-- succeeds says so. Each (value, label) pair replaces a generated value (a
-- lease uuid) in the printed text by <label>, to keep the output stable.
CREATE FUNCTION expect_error(stmt text, VARIADIC labels text[] DEFAULT '{}') RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    state_before text := claims_state();
    rows_before bigint[] := claims_rows();
    rows_after bigint[];
    code text;
    msg text;
    detail text;
    hint text;
BEGIN
    BEGIN
        EXECUTE stmt;
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS code = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                                detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    END;
    FOR i IN 1 .. coalesce(array_length(labels, 1), 0) / 2 LOOP
        msg := replace(msg, labels[2 * i - 1], '<' || labels[2 * i] || '>');
        detail := replace(detail, labels[2 * i - 1], '<' || labels[2 * i] || '>');
    END LOOP;
    IF code IS NULL THEN
        RAISE NOTICE 'UNEXPECTED SUCCESS';
    ELSE
        RAISE NOTICE '%: %', code, msg;
        IF detail <> '' THEN
            RAISE NOTICE 'DETAIL: %', detail;
        END IF;
        IF hint <> '' THEN
            RAISE NOTICE 'HINT: %', hint;
        END IF;
    END IF;
    rows_after := claims_rows();
    IF rows_after = rows_before AND claims_state() = state_before THEN
        RETURN 'nothing written';
    END IF;
    RETURN format('WRITTEN: claims %s -> %s, claim_leases %s -> %s',
                  rows_before[1], rows_after[1], rows_before[2], rows_after[2]);
END
$$;

-- scrub(json): an API answer with its volatile parts replaced by what they
-- must look like: "uuid" and "lease_uuid" by "<uuid v7>", "created_at" and
-- "updated_at" by "<utc>", the list_leases token value by "<token>". A value
-- without the right form is left as it is, so a wrong one shows in the diff.
CREATE FUNCTION scrub(j jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    k text;
    v jsonb;
    result jsonb;
BEGIN
    IF j IS NULL THEN
        RETURN NULL;
    ELSIF jsonb_typeof(j) = 'array' THEN
        SELECT coalesce(jsonb_agg(scrub(e) ORDER BY i), '[]') INTO result
        FROM jsonb_array_elements(j) WITH ORDINALITY AS a(e, i);
        RETURN result;
    ELSIF jsonb_typeof(j) <> 'object' THEN
        RETURN j;
    END IF;
    result := '{}';
    FOR k, v IN SELECT * FROM jsonb_each(j) LOOP
        IF k IN ('uuid', 'lease_uuid') AND jsonb_typeof(v) = 'string'
           AND v #>> '{}' ~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$' THEN
            v := '"<uuid v7>"';
        ELSIF k IN ('created_at', 'updated_at') AND jsonb_typeof(v) = 'string'
              AND v #>> '{}' ~ '^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3}|\.\d{6})?Z$' THEN
            v := '"<utc>"';
        ELSIF k = 'value' AND j ? '@type' AND jsonb_typeof(v) = 'string'
              AND v #>> '{}' ~ '^[A-Za-z0-9+/]{32}[A-Za-z0-9+/=]{4}$' THEN
            v := '"<token>"';
        ELSE
            v := scrub(v);
        END IF;
        result := result || jsonb_build_object(k, v);
    END LOOP;
    RETURN result;
END
$$;

-- Building blocks for requests.
-- rec(): a create entry for a bucket value with a subject and an integer source id.
CREATE FUNCTION rec(bucket_type text, value text, subject_id bigint DEFAULT 1,
                    source_type text DEFAULT 'RAILS_TABLE_USERS', source_id bigint DEFAULT 1)
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'bucket', jsonb_build_object('type', bucket_type, 'value', value),
        'subject', jsonb_build_object('type', 'USER', 'id', subject_id),
        'source', jsonb_build_object('type', source_type, 'rails_primary_key_id', source_id))
$$;

-- bkt(): a destroy entry, only the bucket.
CREATE FUNCTION bkt(bucket_type text, value text) RETURNS jsonb
LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('bucket', jsonb_build_object('type', bucket_type, 'value', value))
$$;

-- req(): a begin_update request.
CREATE FUNCTION req(cell bigint, creates jsonb DEFAULT '[]', destroys jsonb DEFAULT '[]')
RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object('cell_id', cell)
        || CASE WHEN creates <> '[]' THEN jsonb_build_object('create_records', creates) ELSE '{}' END
        || CASE WHEN destroys <> '[]' THEN jsonb_build_object('destroy_records', destroys) ELSE '{}' END
$$;

-- status(type, value): status and owning cell of a value, or 'unclaimed'.
CREATE FUNCTION status(bucket_type text, value text) RETURNS text
LANGUAGE sql AS $$
    SELECT coalesce((SELECT (r->'record'->>'status') || ' cell ' || (r->'record'->>'cell_id')
                            || CASE WHEN r->'record' ? 'lease_uuid' THEN ' leased' ELSE '' END
                     FROM claims_get_record(jsonb_build_object('bucket',
                            jsonb_build_object('type', bucket_type, 'value', value))) AS r),
                    'unclaimed')
$$;

-- records_of(list_records answer): "source id (base64) TYPE=value" for each
-- record, in order.
CREATE FUNCTION records_of(answer jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg((r #>> '{metadata,source,rails_primary_key_id}') || ' '
                              || (r #>> '{metadata,bucket,type}') || '=' || (r #>> '{metadata,bucket,value}')
                              ORDER BY i), '{}')
    FROM jsonb_array_elements(answer -> 'records') WITH ORDINALITY AS a(r, i)
$$;

-- Sanity checks of the helpers themselves.
SELECT expect_error($$SELECT 1/0$$);
SELECT expect_error($$SELECT 1$$);
SELECT scrub('{"uuid": "01890a5d-ac96-774b-bcce-b302099a8057", "created_at": "2024-01-02T03:04:05.123Z", "x": [{"lease_uuid": "not a uuid"}]}');
SELECT expect_error($$SELECT 'abc'::int$$, 'abc', 'text');

-- An unregistered cell is refused with 42501 by every API call for a cell,
-- before anything is written; a registered one is not.
SELECT expect_error(format('SELECT claims_begin_update(%L)',
    req(1201, jsonb_build_array(rec('USERNAMES', 'unregistered-cell')))));
SELECT expect_error($$SELECT claims_commit(1201, '018f0000-0000-7000-8000-000000001201')$$);
SELECT expect_error($$SELECT claims_rollback(1201, '018f0000-0000-7000-8000-000000001201')$$);
SELECT expect_error($$SELECT claims_list_leases('{"cell_id": 1201}')$$);
SELECT expect_error($$SELECT claims_list_records('{"cell_id": 1201, "source_type": "RAILS_TABLE_USERS"}')$$);
SELECT status('USERNAMES', 'unregistered-cell');
SELECT claims_list_leases('{"cell_id": 1200}');
SELECT count(*) AS claims, (SELECT count(*) FROM claim_leases) AS leases FROM claims;
