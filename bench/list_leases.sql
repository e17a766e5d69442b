-- reconciliation scan: one page (:page leases) of claims_list_leases over
-- cell :lcell, continuing with the returned next token; after the last page
-- the client starts over ('-' stands for no token).
SELECT coalesce(r -> 'next' ->> 'value', '-') AS next
FROM claims_list_leases(('{"cell_id":' || :lcell || ',"limit":' || :page
                         || CASE WHEN :next = '-' THEN '' ELSE ',"next":"' || :next || '"' END
                         || '}')::jsonb) AS r \gset
