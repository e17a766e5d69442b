-- signup_plpgsql: the signup of signup.sql through the plain PL/pgSQL
-- functions bench_pl_begin_update and bench_pl_commit (setup.sql): the same
-- request text, variables, round trips and transactions, over the store's
-- tables.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
\set r random(100000, 999999)
\set cell :client_id + 1
SELECT bench_pl_begin_update(('{"cell_id":' || :cell || ',"create_records":['
    || '{"bucket":{"type":"USER_IDS","value":"' || :uid || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"USERNAMES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"EMAILS","value":"user' || :uid || '-' || :r || '@example.com"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_EMAILS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"ROUTES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || :uid || '}}]}')::jsonb)
    ->> 'lease_uuid' AS lease \gset
SELECT bench_pl_commit(:cell, :lease);
