-- routing lookup: claims_get_record of a random existing value
-- (USERNAMES 'lk_<i>', i in [1, :nlookup]).
\set i random(1, :nlookup)
SELECT claims_get_record(('{"bucket":{"type":"USERNAMES","value":"lk_' || :i || '"}}')::jsonb);
