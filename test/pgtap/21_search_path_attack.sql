-- CVE-2018-1058 class: a cell role puts look-alike tables, views,
-- functions and operators into a schema of its own, puts that schema first
-- on search_path and calls every function of the extension. The functions
-- must give the right answers and never touch a look-alike: each look-alike
-- records its use in evil.hits (or would fail the call).
--
-- While the attacker's search_path is in force, no pgTAP function is called
-- (pgTAP's own comparisons would resolve to the look-alike operators): the
-- calls run through sec21_try(), whose body uses no operator, and their
-- answers and SQLSTATEs are stored in sec21_results; the assertions run
-- afterwards with the default search_path.
BEGIN;
SELECT plan(66);

CREATE ROLE sec21_cell1 LOGIN;
CREATE ROLE sec21_cell2 LOGIN;
CREATE ROLE sec21_cell3 LOGIN;
CREATE ROLE sec21_router LOGIN IN ROLE claims_router;
CREATE ROLE sec21_admin LOGIN IN ROLE claims_admin;
SELECT lives_ok($$SELECT claims_register_cell(1, 'sec21-one', 'sec21_cell1')$$, 'register cell 1');
SELECT lives_ok($$SELECT claims_register_cell(2, 'sec21-two', 'sec21_cell2')$$, 'register cell 2');
-- The attacker may create schemas (ordinary roles often may).
DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO sec21_cell1', current_database()); END $$;

-- Where the calls' outcomes go, and the call wrapper (no operator in its body).
CREATE TABLE sec21_results (step text PRIMARY KEY, result jsonb, sqlstate text, who text);
GRANT INSERT, SELECT ON sec21_results TO PUBLIC;
CREATE FUNCTION sec21_try(step text, stmt text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
    res jsonb;
BEGIN
    EXECUTE stmt INTO res;
    INSERT INTO public.sec21_results (step, result, sqlstate, who) VALUES (step, res, NULL, current_user);
EXCEPTION WHEN OTHERS THEN
    INSERT INTO public.sec21_results (step, result, sqlstate, who) VALUES (step, NULL, SQLSTATE, current_user);
END
$f$;

-- Cell 2's data, made before the attack with an ordinary search_path.
SET ROLE sec21_cell2;
SELECT lives_ok($$SELECT claims_begin_update('{"cell_id": 2, "lease_uuid": "21000000-0000-4000-8000-000000000200",
    "create_records": [{"claim": {"username": "sec21-c2-x"}, "subject": {"type": "USER", "id": 20},
                        "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 20}}]}')$$,
    'cell 2 leases sec21-c2-x');
SELECT lives_ok($$SELECT claims_commit(2, '21000000-0000-4000-8000-000000000200')$$, 'cell 2 commits sec21-c2-x');
SELECT lives_ok($$SELECT claims_begin_update('{"cell_id": 2, "lease_uuid": "21000000-0000-4000-8000-000000000201",
    "create_records": [{"claim": {"username": "sec21-c2-f"}, "subject": {"type": "USER", "id": 21},
                        "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 21}}]}')$$,
    'cell 2 leases sec21-c2-f (outstanding)');
SELECT lives_ok($$SELECT claims_begin_update('{"cell_id": 2, "lease_uuid": "21000000-0000-4000-8000-000000000202",
    "create_records": [{"claim": {"username": "sec21-c2-g"}, "subject": {"type": "USER", "id": 22},
                        "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 22}}]}')$$,
    'cell 2 leases sec21-c2-g (outstanding)');
SELECT lives_ok($$SELECT claims_begin_update('{"cell_id": 2, "lease_uuid": "21000000-0000-4000-8000-000000000203",
    "create_records": [{"claim": {"username": "sec21-c2-l"}, "subject": {"type": "USER", "id": 23},
                        "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 23}}]}')$$,
    'cell 2 leases sec21-c2-l (outstanding)');
RESET ROLE;

-- The attacker's look-alikes.
SET ROLE sec21_cell1;
CREATE SCHEMA evil;
GRANT USAGE ON SCHEMA evil TO PUBLIC;
CREATE TABLE evil.hits (what text, who text);
GRANT INSERT, SELECT ON evil.hits TO PUBLIC;
CREATE FUNCTION evil.spy(what text) RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
    INSERT INTO evil.hits (what, who) VALUES (what, current_user);
    RETURN true;
END
$f$;
GRANT EXECUTE ON FUNCTION evil.spy(text) TO PUBLIC;

-- Operators that call everything equal (and greater), recording each use.
CREATE FUNCTION evil.eq_uuid(uuid, uuid) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(uuid,uuid)') $$;
CREATE FUNCTION evil.eq_int8(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(bigint,bigint)') $$;
CREATE FUNCTION evil.eq_int4(integer, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(integer,integer)') $$;
CREATE FUNCTION evil.eq_int84(bigint, integer) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(bigint,integer)') $$;
CREATE FUNCTION evil.eq_text(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(text,text)') $$;
CREATE FUNCTION evil.eq_bytea(bytea, bytea) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(bytea,bytea)') $$;
CREATE FUNCTION evil.eq_jsonb(jsonb, jsonb) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(jsonb,jsonb)') $$;
CREATE FUNCTION evil.eq_bool(boolean, boolean) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('=(boolean,boolean)') $$;
CREATE FUNCTION evil.gt_bytea(bytea, bytea) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('>(bytea,bytea)') $$;
CREATE FUNCTION evil.le_bytea(bytea, bytea) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('<=(bytea,bytea)') $$;
CREATE FUNCTION evil.gt_tstz(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('>(timestamptz,timestamptz)') $$;
CREATE FUNCTION evil.gt_uuid(uuid, uuid) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('>(uuid,uuid)') $$;
CREATE FUNCTION evil.ne_text(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.spy('<>(text,text)') $$;
CREATE OPERATOR evil.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = evil.eq_uuid);
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.eq_int8);
CREATE OPERATOR evil.= (LEFTARG = integer, RIGHTARG = integer, FUNCTION = evil.eq_int4);
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = integer, FUNCTION = evil.eq_int84);
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.eq_text);
CREATE OPERATOR evil.= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = evil.eq_bytea);
CREATE OPERATOR evil.= (LEFTARG = jsonb, RIGHTARG = jsonb, FUNCTION = evil.eq_jsonb);
CREATE OPERATOR evil.= (LEFTARG = boolean, RIGHTARG = boolean, FUNCTION = evil.eq_bool);
CREATE OPERATOR evil.> (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = evil.gt_bytea);
CREATE OPERATOR evil.<= (LEFTARG = bytea, RIGHTARG = bytea, FUNCTION = evil.le_bytea);
CREATE OPERATOR evil.> (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.gt_tstz);
CREATE OPERATOR evil.> (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = evil.gt_uuid);
CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.ne_text);

-- Functions with the names the extension's SQL uses.
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('now()') THEN timestamptz '2000-01-01 00:00:00+00' END $$;
CREATE FUNCTION evil.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('jsonb_build_object(text[])') THEN '{"evil": true}'::jsonb END $$;
CREATE FUNCTION evil.jsonb_build_object(text, text, text, text) RETURNS jsonb LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('jsonb_build_object(text,text,text,text)') THEN '{"evil": true}'::jsonb END $$;
CREATE FUNCTION evil.unnest(anyarray) RETURNS SETOF anyelement LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM evil.spy('unnest(anyarray)');
    RETURN;
END
$f$;
CREATE FUNCTION evil.format(text, text) RETURNS text LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('format(text,text)') THEN 'GRANT claims_admin TO sec21_cell1' END $$;
CREATE FUNCTION evil.cardinality(anyarray) RETURNS integer LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('cardinality(anyarray)') THEN 0 END $$;
CREATE FUNCTION evil.btrim(text) RETURNS text LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('btrim(text)') THEN 'x' END $$;
CREATE FUNCTION evil.coalesce_jsonb(jsonb, jsonb) RETURNS jsonb LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('coalesce_jsonb') THEN $2 END $$;
CREATE FUNCTION evil.sha256(bytea) RETURNS bytea LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('sha256(bytea)') THEN '\x00'::bytea END $$;
CREATE FUNCTION evil.claims_require_admin() RETURNS void LANGUAGE sql AS $$ SELECT evil.spy('claims_require_admin()'); $$;
CREATE FUNCTION evil.claims_caller() RETURNS text LANGUAGE sql
    AS $$ SELECT CASE WHEN evil.spy('claims_caller()') THEN 'somebody_else' END $$;
CREATE FUNCTION evil.claims_audit(text, bigint, uuid, text, jsonb) RETURNS void LANGUAGE sql
    AS $$ SELECT evil.spy('claims_audit()'); $$;
CREATE TYPE evil.claim_status AS ENUM ('ACTIVE', 'LEASE_CREATING', 'LEASE_DESTROYING', 'EVIL');
CREATE TYPE evil.claim_lease_state AS ENUM ('outstanding', 'committed', 'rolled_back', 'evil');

-- Look-alike tables: the data sits in evil.*_data (one row each, with a
-- trigger recording writes); the names the extension uses are views that
-- record every read. The fake registry binds cell 2 to the attacker.
CREATE FUNCTION evil.record_write() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    PERFORM evil.spy(TG_OP || ' ' || TG_TABLE_NAME);
    RETURN NULL;
END
$f$;
CREATE TABLE evil.claims_data (
    uuid uuid, bucket_type integer, bucket_value text, bucket_digest bytea, subject_type integer,
    subject_id bigint, source_type integer, source_id bytea, user_data jsonb, creator_id bigint,
    lease_uuid uuid, status text, replace_subject_type integer, replace_subject_id bigint,
    replace_source_type integer, replace_source_id bytea, replace_user_data jsonb,
    created_at timestamptz, updated_at timestamptz);
INSERT INTO evil.claims_data VALUES ('21000000-0000-4000-8000-00000000e001', 4, 'sec21-c2-x', sha256('sec21-c2-x'),
    4, 1, 1, '\x01', NULL, 1, NULL, 'ACTIVE', NULL, NULL, NULL, NULL, NULL, now(), now());
CREATE TABLE evil.claim_leases_data (
    uuid uuid, creator_id bigint, payload jsonb, state text, claim_types integer[], claim_digests bytea[],
    created_at timestamptz, updated_at timestamptz, finished_at timestamptz, finished_by text, finish_reason text);
INSERT INTO evil.claim_leases_data VALUES ('21000000-0000-4000-8000-000000000203', 1, '{}', 'outstanding',
    '{}', '{}', now(), now(), NULL, NULL, NULL);
CREATE TABLE evil.claim_cells_data (cell_id bigint, name text, role_name text, disabled boolean,
    created_at timestamptz, updated_at timestamptz);
INSERT INTO evil.claim_cells_data VALUES (2, 'evil', 'sec21_cell1', false, now(), now()),
                                         (99, 'evil99', 'sec21_cell1', false, now(), now());
CREATE TABLE evil.claim_admin_actions_data (action_id bigint, at timestamptz, actor text, session_role text,
    action text, cell_id bigint, lease_uuid uuid, reason text, detail jsonb);
INSERT INTO evil.claim_admin_actions_data VALUES (1, now(), 'x', 'x', 'x', 1, NULL, NULL, '{}');
CREATE TABLE evil.claim_bucket_types_data (type_id integer, name text, claim_field text, integer_valued boolean,
    aliases text[], builtin boolean);
INSERT INTO evil.claim_bucket_types_data VALUES (4, 'USERNAMES', 'username', true, '{}', true);
CREATE TRIGGER w AFTER INSERT OR UPDATE OR DELETE ON evil.claims_data FOR EACH STATEMENT EXECUTE FUNCTION evil.record_write();
CREATE TRIGGER w AFTER INSERT OR UPDATE OR DELETE ON evil.claim_leases_data FOR EACH STATEMENT EXECUTE FUNCTION evil.record_write();
CREATE TRIGGER w AFTER INSERT OR UPDATE OR DELETE ON evil.claim_cells_data FOR EACH STATEMENT EXECUTE FUNCTION evil.record_write();
CREATE TRIGGER w AFTER INSERT OR UPDATE OR DELETE ON evil.claim_admin_actions_data FOR EACH STATEMENT EXECUTE FUNCTION evil.record_write();
CREATE VIEW evil.claims AS SELECT * FROM evil.claims_data WHERE evil.spy('read claims');
CREATE VIEW evil.claim_leases AS SELECT * FROM evil.claim_leases_data WHERE evil.spy('read claim_leases');
CREATE VIEW evil.claim_cells AS SELECT * FROM evil.claim_cells_data WHERE evil.spy('read claim_cells');
CREATE VIEW evil.claim_admin_actions AS SELECT * FROM evil.claim_admin_actions_data WHERE evil.spy('read claim_admin_actions');
CREATE VIEW evil.claim_bucket_types AS SELECT * FROM evil.claim_bucket_types_data WHERE evil.spy('read claim_bucket_types');
CREATE VIEW evil.claims_outstanding_leases AS
    SELECT creator_id AS cell_id, uuid AS lease_uuid FROM evil.claim_leases_data WHERE evil.spy('read claims_outstanding_leases');
CREATE VIEW evil.pg_roles AS SELECT 'sec21_cell1'::name AS rolname WHERE evil.spy('read pg_roles');
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA evil TO PUBLIC;
REVOKE INSERT, UPDATE, DELETE ON evil.hits FROM PUBLIC;
-- Temporary look-alikes too (pg_temp is searched for relations).
CREATE TEMP VIEW claim_cells AS SELECT * FROM evil.claim_cells_data WHERE evil.spy('read pg_temp.claim_cells');
CREATE TEMP VIEW claims AS SELECT * FROM evil.claims_data WHERE evil.spy('read pg_temp.claims');
CREATE TEMP VIEW claim_leases AS SELECT * FROM evil.claim_leases_data WHERE evil.spy('read pg_temp.claim_leases');
RESET ROLE;
SELECT is((SELECT count(*) FROM evil.hits), 0::bigint, 'no look-alike has been used yet');

-- The attack: cell 1 calls every API function with the attacker's path.
SET ROLE sec21_cell1;
-- Temporary look-alike types: a search_path that does not name pg_temp
-- searches it first for types, so "SET search_path = pg_catalog" alone would
-- make the extension's casts to text and bytea run the attacker's check.
-- (Made only now: the test's own plpgsql, compiled from here on, names
-- neither type.)
CREATE DOMAIN pg_temp.text AS pg_catalog.text CHECK (evil.spy('cast to pg_temp.text'));
CREATE DOMAIN pg_temp.bytea AS pg_catalog.bytea CHECK (evil.spy('cast to pg_temp.bytea'));
SET search_path = evil, public, pg_catalog;
DO $attack$
DECLARE
    tok jsonb;
BEGIN
    PERFORM public.sec21_try('begin', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "lease_uuid": "21000000-0000-4000-8000-000000000101",
        "create_records": [
          {"claim": {"username": "sec21-a"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}, "user_data": {"k": "a"}},
          {"claim": {"username": "sec21-b"}, "subject": {"type": "USER", "id": 2},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}},
          {"claim": {"username": "sec21-c"}, "subject": {"type": "USER", "id": 3},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 3}}]}')$s$);
    PERFORM public.sec21_try('begin again', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "lease_uuid": "21000000-0000-4000-8000-000000000101",
        "create_records": [
          {"claim": {"username": "sec21-a"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}, "user_data": {"k": "a"}},
          {"claim": {"username": "sec21-b"}, "subject": {"type": "USER", "id": 2},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}},
          {"claim": {"username": "sec21-c"}, "subject": {"type": "USER", "id": 3},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 3}}]}')$s$);
    PERFORM public.sec21_try('begin same uuid other request', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "lease_uuid": "21000000-0000-4000-8000-000000000101",
        "create_records": [{"claim": {"username": "sec21-zzz"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$s$);
    PERFORM public.sec21_try('get leased', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-a"}}')$s$);
    PERFORM public.sec21_try('list leases', $s$SELECT public.claims_list_leases('{"cell_id": 1}')$s$);
    PERFORM public.sec21_try('commit', $s$SELECT NULL::jsonb FROM public.claims_commit(1, '21000000-0000-4000-8000-000000000101')$s$);
    PERFORM public.sec21_try('commit again', $s$SELECT NULL::jsonb FROM public.claims_commit(1, '21000000-0000-4000-8000-000000000101')$s$);
    PERFORM public.sec21_try('rollback committed', $s$SELECT NULL::jsonb FROM public.claims_rollback(1, '21000000-0000-4000-8000-000000000101')$s$);
    PERFORM public.sec21_try('get active', $s$SELECT public.claims_get_record('{"bucket": {"type": "USERNAMES", "value": "sec21-a"}}')$s$);
    PERFORM public.sec21_try('get unclaimed', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-none"}}')$s$);
    PERFORM public.sec21_try('get other cell', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-c2-x"}}')$s$);
    PERFORM public.sec21_try('list records', $s$SELECT public.claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS"}')$s$);
    PERFORM public.sec21_try('list records range', $s$SELECT public.claims_list_records('{"cell_id": 1,
        "source_type": "RAILS_TABLE_USERS", "source_id_gt": "AAAAAAAAAAE=", "source_id_lte": "AAAAAAAAAAI="}')$s$);
    PERFORM public.sec21_try('list records by type', $s$SELECT public.claims_list_records('{"cell_id": 1,
        "source_type": "RAILS_TABLE_USERS", "bucket_types": ["EMAILS"]}')$s$);
    -- two more leases, for paging and a rollback
    PERFORM public.sec21_try('begin r', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "lease_uuid": "21000000-0000-4000-8000-000000000102",
        "create_records": [{"claim": {"username": "sec21-r"}, "subject": {"type": "USER", "id": 9},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 9}}]}')$s$);
    PERFORM public.sec21_try('begin d', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "lease_uuid": "21000000-0000-4000-8000-000000000103",
        "destroy_records": [{"claim": {"username": "sec21-b"}}]}')$s$);
    PERFORM public.sec21_try('list leases page 1', $s$SELECT public.claims_list_leases('{"cell_id": 1, "limit": 1,
        "created_after": "2000-01-01T00:00:00Z"}')$s$);
    BEGIN
        tok := public.claims_list_leases('{"cell_id": 1, "limit": 1, "created_after": "2000-01-01T00:00:00Z"}')
               OPERATOR(pg_catalog.->) 'next';
    EXCEPTION WHEN OTHERS THEN
        tok := NULL;
    END;
    PERFORM public.sec21_try('list leases page 2', pg_catalog.format('SELECT public.claims_list_leases(%L)',
        pg_catalog.jsonb_build_object('cell_id', 1, 'limit', 1, 'created_after', '2000-01-01T00:00:00Z', 'next', tok)));
    PERFORM public.sec21_try('rollback r', $s$SELECT NULL::jsonb FROM public.claims_rollback(1, '21000000-0000-4000-8000-000000000102')$s$);
    PERFORM public.sec21_try('get rolled back', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-r"}}')$s$);
    PERFORM public.sec21_try('commit d', $s$SELECT NULL::jsonb FROM public.claims_commit(1, '21000000-0000-4000-8000-000000000103')$s$);
    PERFORM public.sec21_try('get destroyed', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-b"}}')$s$);
    -- what the look-alikes would have allowed
    PERFORM public.sec21_try('begin for cell 2', $s$SELECT public.claims_begin_update('{"cell_id": 2,
        "create_records": [{"claim": {"username": "sec21-steal"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$s$);
    PERFORM public.sec21_try('begin for cell 99', $s$SELECT public.claims_begin_update('{"cell_id": 99,
        "create_records": [{"claim": {"username": "sec21-steal"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$s$);
    PERFORM public.sec21_try('list records of cell 2', $s$SELECT public.claims_list_records('{"cell_id": 2, "source_type": 1}')$s$);
    PERFORM public.sec21_try('list leases of cell 2', $s$SELECT public.claims_list_leases('{"cell_id": 2}')$s$);
    PERFORM public.sec21_try('commit cell 2 lease as cell 1', $s$SELECT NULL::jsonb FROM public.claims_commit(1, '21000000-0000-4000-8000-000000000203')$s$);
    PERFORM public.sec21_try('destroy cell 2 value', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "destroy_records": [{"claim": {"username": "sec21-c2-x"}}]}')$s$);
    PERFORM public.sec21_try('create cell 2 value', $s$SELECT public.claims_begin_update('{"cell_id": 1,
        "create_records": [{"claim": {"username": "sec21-c2-x"}, "subject": {"type": "USER", "id": 1},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}')$s$);
    PERFORM public.sec21_try('admin function', $s$SELECT public.claims_decommission_cell(2, 'x', true)$s$);
END
$attack$;
RESET search_path;
RESET ROLE;

-- The routing role and the administrator, with the same path.
SET ROLE sec21_router;
SET search_path = evil, public, pg_catalog;
DO $attack$
BEGIN
    PERFORM public.sec21_try('router get', $s$SELECT public.claims_get_record('{"claim": {"username": "sec21-c2-x"}}')$s$);
END
$attack$;
RESET search_path;
RESET ROLE;

SET ROLE sec21_admin;
SET search_path = evil, public, pg_catalog;
DO $attack$
BEGIN
    PERFORM public.sec21_try('admin view', $s$SELECT pg_catalog.jsonb_agg(v.lease_uuid) FROM public.claims_outstanding_leases v$s$);
    PERFORM public.sec21_try('admin register', $s$SELECT NULL::jsonb FROM public.claims_register_cell(3, 'sec21-three', 'sec21_cell3', 'new cell')$s$);
    PERFORM public.sec21_try('admin rename', $s$SELECT NULL::jsonb FROM public.claims_rename_cell(3, 'sec21-three-renamed', 'naming')$s$);
    PERFORM public.sec21_try('admin disable', $s$SELECT NULL::jsonb FROM public.claims_set_cell_disabled(3, true, 'pause')$s$);
    PERFORM public.sec21_try('admin enable', $s$SELECT NULL::jsonb FROM public.claims_set_cell_disabled(3, false, 'resume')$s$);
    PERFORM public.sec21_try('admin finish rollback', $s$SELECT public.claims_admin_finish_lease('21000000-0000-4000-8000-000000000201', 'rollback', 'stuck f')$s$);
    PERFORM public.sec21_try('admin finish commit', $s$SELECT public.claims_admin_finish_lease('21000000-0000-4000-8000-000000000202', 'commit', 'stuck g')$s$);
    PERFORM public.sec21_try('admin decommission unforced', $s$SELECT public.claims_decommission_cell(2, 'retire', false)$s$);
    PERFORM public.sec21_try('admin decommission forced', $s$SELECT public.claims_decommission_cell(2, 'retire', true)$s$);
    PERFORM public.sec21_try('admin list cell 1', $s$SELECT public.claims_list_leases('{"cell_id": 1}')$s$);
END
$attack$;
RESET search_path;
RESET ROLE;

SET ROLE sec21_cell3;
SET search_path = evil, public, pg_catalog;
DO $attack$
BEGIN
    PERFORM public.sec21_try('cell 3 takes a freed value', $s$SELECT public.claims_begin_update('{"cell_id": 3,
        "lease_uuid": "21000000-0000-4000-8000-000000000301",
        "create_records": [{"claim": {"username": "sec21-c2-x"}, "subject": {"type": "USER", "id": 30},
           "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 30}}]}')$s$);
END
$attack$;
RESET search_path;
RESET ROLE;

-- The attacker's temporary views and types would shadow the tables and
-- types for the unqualified names below too: remove them.
SET ROLE sec21_cell1;
DROP VIEW pg_temp.claim_cells, pg_temp.claims, pg_temp.claim_leases;
DROP DOMAIN pg_temp.text, pg_temp.bytea;
RESET ROLE;

-- Not one look-alike was used.
SELECT is_empty($$SELECT what, who FROM evil.hits$$, 'no look-alike table, view, function or operator was used');
SELECT is_empty($$SELECT step FROM sec21_results WHERE who IS NULL$$, 'every call recorded its outcome');

-- The answers were right.
CREATE FUNCTION sec21(step text) RETURNS jsonb LANGUAGE sql AS $$ SELECT result FROM sec21_results r WHERE r.step = $1 $$;
CREATE FUNCTION sec21_state(step text) RETURNS text LANGUAGE sql AS $$ SELECT coalesce(sqlstate, 'ok') FROM sec21_results r WHERE r.step = $1 $$;
SELECT is(sec21('begin'), '{"cell_id": "1", "lease_uuid": "21000000-0000-4000-8000-000000000101"}', 'begin: right answer');
SELECT is(sec21('begin again'), sec21('begin'), 'begin repeated: the same answer');
SELECT is(sec21_state('begin same uuid other request'), '22023', 'same lease uuid, different request: 22023 (jsonb = not faked)');
SELECT is(sec21('get leased') #>> '{record,status}', 'LEASE_CREATING', 'get_record while leased');
SELECT is(sec21('get leased') #>> '{record,cell_id}', '1', 'get_record names cell 1');
SELECT is(sec21('get leased') #> '{record,metadata,user_data}', '{"k": "a"}', 'get_record returns the user data');
SELECT is(sec21('list leases'), jsonb_build_object('leases', jsonb_build_array(jsonb_build_object(
        'uuid', '21000000-0000-4000-8000-000000000101',
        'created_at', sec21('list leases') #> '{leases,0,created_at}',
        'updated_at', sec21('list leases') #> '{leases,0,updated_at}'))),
    'list_leases: exactly cell 1''s lease');
SELECT is(sec21_state('commit'), 'ok', 'commit succeeds');
SELECT is(sec21_state('commit again'), 'ok', 'commit repeated succeeds');
SELECT is(sec21_state('rollback committed'), '55000', 'rollback of a committed lease: 55000');
SELECT is(sec21('get active') #>> '{record,status}', 'ACTIVE', 'get_record after commit: ACTIVE');
SELECT is(sec21('get unclaimed'), NULL, 'get_record of an unclaimed value: NULL');
SELECT is(sec21_state('get unclaimed'), 'ok', '... without an error');
SELECT is(sec21('get other cell') #>> '{record,cell_id}', '2', 'get_record of cell 2''s value names cell 2');
SELECT is((SELECT array_agg(r #>> '{metadata,claim,username}') FROM jsonb_array_elements(sec21('list records') -> 'records') r),
    ARRAY['sec21-a', 'sec21-b', 'sec21-c'], 'list_records: cell 1''s three records in source id order');
SELECT is((SELECT array_agg(r #>> '{metadata,claim,username}') FROM jsonb_array_elements(sec21('list records range') -> 'records') r),
    ARRAY['sec21-b'], 'list_records with source_id_gt/lte: the one record in range');
SELECT is(sec21('list records by type'), '{"records": [], "truncated": false}', 'list_records filtered by type: none');
SELECT is(sec21_state('begin r'), 'ok', 'begin of lease r');
SELECT is(sec21_state('begin d'), 'ok', 'begin of destroy lease d');
SELECT is(jsonb_array_length(sec21('list leases page 1') -> 'leases'), 1, 'list_leases page 1: one lease');
SELECT ok(sec21('list leases page 1') ? 'next', 'list_leases page 1 has a next token');
SELECT is(jsonb_array_length(sec21('list leases page 2') -> 'leases'), 1, 'list_leases page 2: one lease');
SELECT isnt(sec21('list leases page 2') #>> '{leases,0,uuid}', sec21('list leases page 1') #>> '{leases,0,uuid}',
    'page 2 goes on after page 1');
SELECT is(sec21_state('rollback r'), 'ok', 'rollback of lease r');
SELECT is(sec21('get rolled back'), NULL, 'the rolled back value is free');
SELECT is(sec21_state('commit d'), 'ok', 'commit of destroy lease d');
SELECT is(sec21('get destroyed'), NULL, 'the destroyed value is free');
SELECT is(sec21_state('begin for cell 2'), '42501', 'begin for cell 2: 42501 (the fake registry was not read)');
SELECT is(sec21_state('begin for cell 99'), '42501', 'begin for unregistered cell 99: 42501');
SELECT is(sec21_state('list records of cell 2'), '42501', 'list_records of cell 2: 42501');
SELECT is(sec21_state('list leases of cell 2'), '42501', 'list_leases of cell 2: 42501');
SELECT is(sec21_state('commit cell 2 lease as cell 1'), '42501', 'commit of cell 2''s lease named as cell 1''s: 42501');
SELECT is(sec21_state('destroy cell 2 value'), '42501', 'destroy of cell 2''s value: 42501');
SELECT is(sec21_state('create cell 2 value'), '23505', 'create of cell 2''s value: 23505');
SELECT is(sec21_state('admin function'), '42501', 'administrator function as cell 1: 42501');
SELECT is(sec21('router get') #>> '{record,cell_id}', '2', 'router: get_record names cell 2');
SELECT is((SELECT array_agg(x ORDER BY x) FROM jsonb_array_elements_text(sec21('admin view')) x),
    ARRAY['21000000-0000-4000-8000-000000000201', '21000000-0000-4000-8000-000000000202',
          '21000000-0000-4000-8000-000000000203'],
    'administrator view: exactly the outstanding leases');
SELECT is(sec21_state('admin register'), 'ok', 'register_cell');
SELECT is(sec21_state('admin rename'), 'ok', 'rename_cell');
SELECT is(sec21_state('admin disable'), 'ok', 'set_cell_disabled true');
SELECT is(sec21_state('admin enable'), 'ok', 'set_cell_disabled false');
SELECT is(sec21('admin finish rollback'), '{"cell_id": "2", "lease_uuid": "21000000-0000-4000-8000-000000000201",
    "previous_state": "outstanding", "state": "rolled_back"}', 'admin_finish_lease rollback: right answer');
SELECT is(sec21('admin finish commit'), '{"cell_id": "2", "lease_uuid": "21000000-0000-4000-8000-000000000202",
    "previous_state": "outstanding", "state": "committed"}', 'admin_finish_lease commit: right answer');
SELECT is(sec21_state('admin decommission unforced'), '55000', 'decommission with an outstanding lease: 55000');
SELECT is(sec21('admin decommission forced'), '{"cell_id": "2", "claims_released": 2, "leases_rolled_back": 1,
    "disabled": true}', 'decommission forced: released 2 claims, rolled back 1 lease');
SELECT ok(sec21('admin list cell 1') ? 'leases', 'administrator lists cell 1''s leases');
SELECT is(sec21('cell 3 takes a freed value'), '{"cell_id": "3", "lease_uuid": "21000000-0000-4000-8000-000000000301"}',
    'cell 3 claims a value freed by the decommission');

-- The tables say the same (as superuser).
SELECT results_eq(
    $$SELECT cell_id, name, role_name, disabled FROM claim_cells ORDER BY cell_id$$,
    $$VALUES (1::bigint, 'sec21-one', 'sec21_cell1', false), (2, 'sec21-two', 'sec21_cell2', true),
             (3, 'sec21-three-renamed', 'sec21_cell3', false)$$,
    'the registry holds what the administrator did, nothing the attacker planted');
SELECT results_eq(
    $$SELECT actor, action, cell_id, reason FROM claim_admin_actions WHERE actor <> current_user ORDER BY action_id$$,
    $$VALUES ('sec21_admin', 'register_cell', 3::bigint, 'new cell'), ('sec21_admin', 'rename_cell', 3, 'naming'),
             ('sec21_admin', 'disable_cell', 3, 'pause'), ('sec21_admin', 'enable_cell', 3, 'resume'),
             ('sec21_admin', 'finish_lease_rollback', 2, 'stuck f'), ('sec21_admin', 'finish_lease_commit', 2, 'stuck g'),
             ('sec21_admin', 'decommission_cell', 2, 'retire')$$,
    'the audit log names the administrator for each action (not a faked caller)');
SELECT results_eq(
    $$SELECT uuid::text, state::text, finished_by, finish_reason FROM claim_leases
       WHERE creator_id = 2 AND uuid::text <> '21000000-0000-4000-8000-000000000200' ORDER BY uuid$$,
    $$VALUES ('21000000-0000-4000-8000-000000000201', 'rolled_back', 'sec21_admin', 'stuck f'),
             ('21000000-0000-4000-8000-000000000202', 'committed', 'sec21_admin', 'stuck g'),
             ('21000000-0000-4000-8000-000000000203', 'rolled_back', 'sec21_admin', 'retire')$$,
    'finished_by and finish_reason recorded on cell 2''s leases');
SELECT is((SELECT count(*) FROM claims WHERE creator_id = 2), 0::bigint, 'cell 2 holds no claims after decommission');
SELECT is((SELECT string_agg(bucket_value, ',' ORDER BY bucket_value) FROM claims WHERE creator_id = 1),
    'sec21-a,sec21-c', 'cell 1 holds exactly sec21-a and sec21-c');
SELECT is((SELECT count(*) FROM pg_auth_members m WHERE m.roleid = 'claims_admin'::regrole
            AND m.member = 'sec21_cell1'::regrole), 0::bigint, 'the attacker did not become an administrator');
SELECT ok(pg_has_role('sec21_cell3', 'claims_cell', 'MEMBER'), 'register_cell granted claims_cell to sec21_cell3');

-- The traps were armed: with the same path, the look-alikes do resolve.
SET ROLE sec21_cell1;
SET search_path = evil, public, pg_catalog;
INSERT INTO public.sec21_results (step, result, who)
    SELECT 'armed', pg_catalog.to_jsonb(pg_catalog.array_agg(x)), current_user
    FROM (SELECT (1 = 2)::text UNION ALL SELECT ('a'::text = 'b'::text)::text
          UNION ALL SELECT now()::text UNION ALL SELECT (SELECT count(*) FROM claim_cells)::text) AS t(x);
RESET search_path;
RESET ROLE;
SELECT is(sec21('armed'), '["true", "true", "2000-01-01 00:00:00+00", "2"]',
    'with the attacker''s path the look-alikes answer (1 = 2 is true, now() is 2000)');
SELECT results_eq($$SELECT what FROM evil.hits ORDER BY what$$,
    $$VALUES ('=(integer,integer)'), ('=(text,text)'), ('now()'), ('read claim_cells'), ('read claim_cells')$$,
    'and they record their use');

SELECT * FROM finish();
ROLLBACK;
