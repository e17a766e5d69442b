-- backfill: one claims_begin_update creating :batch ROUTES values, then
-- claims_commit. The request text is built in the statement (the floor
-- builds and stores the same text).
\set n :n + 1
\set base :run * 100000000000 + :client_id * 100000000 + :n * :batch
\set cell :client_id + 1
SELECT claims_begin_update(('{"cell_id":' || :cell || ',"create_records":['
    || (SELECT string_agg('{"bucket":{"type":"ROUTES","value":"bf-' || id
                          || '/project"},"subject":{"type":"PROJECT","id":' || id
                          || '},"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || id || '}}', ',')
        FROM generate_series(:base::bigint + 1, :base::bigint + :batch::int) AS id)
    || ']}')::jsonb)
    ->> 'lease_uuid' AS lease \gset
SELECT claims_commit(:cell, :lease);
