-- cell_setup.sql: the cell database of the cell section (psql variables
-- sock, port, store, cell: the store's socket directory, port, database
-- and the cell id registered for the role bench_cell).
--
-- Three identical users tables, one per way of signing up:
--   users_claimed  claims_cell claims username, email and route at the end
--                  of the statement (immediate, the default);
--   users_deferred the same, deferred: claimed at COMMIT;
--   users_plain    nothing claimed (what a cell without claims pays);
--   users_hand     the same lease protocol done by hand in SQL
--                  (bench_hand_signup), through dblink, with its own lease
--                  table shaped like claims_cell.outstanding_leases.
SET client_min_messages = warning;
CREATE EXTENSION claims_cell;
CREATE EXTENSION dblink;

-- claims_cell's store: the same server, over the same socket as dblink.
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host :'sock', port :'port', dbname :'store');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'bench_cell', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => :cell);

CREATE TABLE users_claimed (id bigint PRIMARY KEY, username text, email text, route text);
CREATE TABLE users_plain (LIKE users_claimed INCLUDING ALL);
CREATE TABLE users_hand (LIKE users_claimed INCLUDING ALL);
SELECT claims_cell.claim_column('users_claimed', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');
SELECT claims_cell.claim_column('users_claimed', 'email', 'EMAILS', 'USER', 'id', 'RAILS_TABLE_USERS');
SELECT claims_cell.claim_column('users_claimed', 'route', 'ROUTES', 'USER', 'id', 'RAILS_TABLE_USERS');
-- the same claims at COMMIT (deferred), beside the immediate users_claimed
CREATE TABLE users_deferred (LIKE users_claimed INCLUDING ALL);
SELECT claims_cell.claim_column('users_deferred', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS', true, true);
SELECT claims_cell.claim_column('users_deferred', 'email', 'EMAILS', 'USER', 'id', 'RAILS_TABLE_USERS', true, true);
SELECT claims_cell.claim_column('users_deferred', 'route', 'ROUTES', 'USER', 'id', 'RAILS_TABLE_USERS', true, true);

-- The by-hand protocol's lease rows and where its store is.
CREATE TABLE bench_hand_leases (LIKE claims_cell.outstanding_leases INCLUDING ALL);
CREATE TABLE bench_hand_store (connstr text NOT NULL, cell_id bigint NOT NULL);
INSERT INTO bench_hand_store
    VALUES (format('host=%s port=%s dbname=%s user=bench_cell', :'sock', :'port', :'store'), :cell);

-- A version 7 (time-ordered) uuid, as claims_cell chooses for its leases,
-- so that both put their leases at the right edge of the store's index.
CREATE FUNCTION bench_uuid7() RETURNS uuid
LANGUAGE sql VOLATILE AS $$
    SELECT (lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0')
            || '7' || substr(md5(random()::text), 1, 3)
            || '8' || substr(md5(random()::text), 1, 15))::uuid
$$;

-- Signup with the lease protocol by hand, one CALL from the client as the
-- claimed INSERT is one statement: delete the previous signup's committed
-- lease row, insert the user, take the lease at the store with a uuid
-- chosen here (claims_begin_update over the session's persistent dblink
-- connection "store"), record the lease row, COMMIT locally, then
-- claims_commit at the store. Returns the lease, the next call's "prev".
-- The same steps, round trips and commits as claims_cell at COMMIT.
CREATE PROCEDURE bench_hand_signup(uid bigint, prev uuid, INOUT lease uuid)
LANGUAGE plpgsql AS $$
DECLARE
    s bench_hand_store;
    uname text := 'u' || uid;
    src text := encode(int8send(uid), 'base64');
    rec text;
    request text;
    answer text;
BEGIN
    SELECT * INTO STRICT s FROM bench_hand_store;
    DELETE FROM bench_hand_leases WHERE uuid = prev;
    INSERT INTO users_hand VALUES (uid, uname, uname || '@example.com', uname || '/profile');
    IF NOT coalesce('store' = ANY (dblink_get_connections()), false) THEN
        PERFORM dblink_connect('store', s.connstr);
    END IF;
    lease := bench_uuid7();
    rec := '"subject": {"type": "USER", "id": "' || uid || '"}, '
        || '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "' || src || '"}}';
    request := format('{"cell_id": %s, "lease_uuid": "%s", "create_records": ['
                      '{"bucket": {"type": "USERNAMES", "value": %s}, %s, '
                      '{"bucket": {"type": "EMAILS", "value": %s}, %s, '
                      '{"bucket": {"type": "ROUTES", "value": %s}, %s], "destroy_records": []}',
                      s.cell_id, lease, to_json(uname), rec, to_json(uname || '@example.com'), rec,
                      to_json(uname || '/profile'), rec);
    SELECT a INTO answer
    FROM dblink('store', format('SELECT claims_begin_update(%L::jsonb)::text', request)) AS t(a text);
    IF strpos(answer, lease::text) = 0 THEN
        RAISE EXCEPTION 'the store answered with another lease than %: %', lease, answer;
    END IF;
    INSERT INTO bench_hand_leases (uuid) VALUES (lease);
    COMMIT;
    PERFORM FROM dblink('store', format('SELECT claims_commit(%s, %L)::text', s.cell_id, lease)) AS t(a text);
END
$$;
