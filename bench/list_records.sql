-- verification scan: one page (:page records) of claims_list_records over
-- cell :scell, resuming after the last source id of the previous page
-- (source_id_gt); after the last page the client starts over. "AA==" is
-- one zero byte, below every 8-byte source id.
SELECT coalesce(CASE WHEN (r ->> 'truncated')::boolean
                     THEN r -> 'records' -> -1 -> 'metadata' -> 'source' ->> 'rails_primary_key_id' END,
                'AA==') AS last
FROM claims_list_records(('{"cell_id":' || :scell || ',"source_type":"RAILS_TABLE_USERS","source_id_gt":"'
                          || :last || '","limit":' || :page || '}')::jsonb) AS r \gset
