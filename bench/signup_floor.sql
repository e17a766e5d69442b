-- signup floor: the same rows written with plain SQL and no validation, in
-- as few round trips as the API takes. Begin: one statement inserts the
-- lease (same payload, same sorted key arrays) and the four LEASE_CREATING
-- claims. Commit: one statement marks the lease committed and the claims
-- ACTIVE. Same request text, same variables as signup.sql.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
\set r random(100000, 999999)
\set cell :client_id + 1
WITH req AS (
    SELECT ('{"cell_id":' || :cell || ',"create_records":['
    || '{"bucket":{"type":"USER_IDS","value":"' || :uid || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"USERNAMES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_USERS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"EMAILS","value":"user' || :uid || '-' || :r || '@example.com"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_EMAILS","rails_primary_key_id":' || :uid || '}},'
    || '{"bucket":{"type":"ROUTES","value":"user' || :uid || '-' || :r || '"},"subject":{"type":"USER","id":' || :uid
    || '},"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || :uid || '}}]}')::jsonb AS payload
), v AS (
    SELECT t, val, sha256(convert_to(val, 'UTF8')) AS d, srct
    FROM (VALUES (10, '' || :uid, 1),
                 (4, 'user' || :uid || '-' || :r, 1),
                 (5, 'user' || :uid || '-' || :r || '@example.com', 2),
                 (1, 'user' || :uid || '-' || :r, 3)) AS x(t, val, srct)
), lease AS (
    INSERT INTO claim_leases (uuid, creator_id, payload, claim_types, claim_digests)
    SELECT gen_random_uuid(), :cell::bigint, req.payload,
           (SELECT array_agg(t ORDER BY t, d) FROM v),
           (SELECT array_agg(d ORDER BY t, d) FROM v)
    FROM req
    RETURNING uuid
), ins AS (
    INSERT INTO claims (uuid, bucket_type, bucket_value, bucket_digest, subject_type, subject_id,
                        source_type, source_id, creator_id, lease_uuid, status)
    SELECT gen_random_uuid(), v.t, v.val, v.d, 4, :uid::bigint, v.srct, int8send(:uid::bigint),
           :cell::bigint, lease.uuid, 'LEASE_CREATING'
    FROM v CROSS JOIN lease
    ORDER BY v.t, v.d
)
SELECT uuid AS lease FROM lease \gset
WITH l AS (
    UPDATE claim_leases SET state = 'committed', updated_at = now(), finished_at = now()
    WHERE uuid = :lease::uuid AND state = 'outstanding'
    RETURNING uuid, claim_types, claim_digests
)
UPDATE claims c SET status = 'ACTIVE', lease_uuid = NULL, updated_at = now()
FROM l CROSS JOIN LATERAL unnest(l.claim_types, l.claim_digests) AS k(t, d)
WHERE c.bucket_type = k.t AND c.bucket_digest = k.d AND c.lease_uuid = l.uuid;
