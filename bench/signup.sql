-- signup: one claims_begin_update creating a new user's four values (user
-- id, username, email, route), then claims_commit. Two round trips, two
-- transactions. Variables: run (unique per pgbench run), n (per-client
-- counter, starts at 0); the values never repeat on one server.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
\set r random(100000, 999999)
\set cell :client_id + 1
SELECT claims_begin_update(('{"cell_id":' || :cell || ',"create_records":['
    || '{"bucket":{"type":"USER_IDS","value":"' || :uid || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"USERNAMES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"EMAILS","value":"user' || :uid || '-' || :r || '@example.com"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_EMAILS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"ROUTES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || :uid || '}}]}')::jsonb)
    ->> 'lease_uuid' AS lease \gset
SELECT claims_commit(:cell, :lease);
