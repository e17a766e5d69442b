-- rename: one claims_begin_update destroying one of the client's values and
-- creating another, then claims_commit. Transaction n of a client destroys
-- 'rn<run>-<client>-<n - pool>' (preloaded for n <= pool, created by an
-- earlier transaction after that) and creates 'rn<run>-<client>-<n>'.
\set n :n + 1
\set old :n - :pool
\set cell :client_id + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
SELECT claims_begin_update(('{"cell_id":' || :cell
    || ',"destroy_records":[{"bucket":{"type":"USERNAMES","value":"rn' || :run || '-' || :client_id || '-' || :old || '"}}]'
    || ',"create_records":[{"bucket":{"type":"USERNAMES","value":"rn' || :run || '-' || :client_id || '-' || :n
    || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}}]}')::jsonb)
    ->> 'lease_uuid' AS lease \gset
SELECT claims_commit(:cell, :lease);
