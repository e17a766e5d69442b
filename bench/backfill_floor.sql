-- backfill floor: the same :batch claims and lease written with plain SQL,
-- no validation. Begin: one statement; commit: one statement.
\set n :n + 1
\set base :run * 100000000000 + :client_id * 100000000 + :n * :batch
\set cell :client_id + 1
WITH req AS (
    SELECT ('{"cell_id":' || :cell || ',"create_records":['
    || (SELECT string_agg('{"bucket":{"type":"ROUTES","value":"bf-' || id
                          || '/project"},"subject":{"type":"PROJECT","id":' || id
                          || '},"source":{"type":"RAILS_TABLE_ROUTES","rails_primary_key_id":' || id || '}}', ',')
        FROM generate_series(:base::bigint + 1, :base::bigint + :batch::int) AS id)
    || ']}')::jsonb AS payload
), v AS MATERIALIZED (
    SELECT 1 AS t, val, sha256(convert_to(val, 'UTF8')) AS d, id
    FROM generate_series(:base::bigint + 1, :base::bigint + :batch::int) AS id,
         LATERAL (SELECT 'bf-' || id || '/project' AS val) AS x
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
    SELECT gen_random_uuid(), v.t, v.val, v.d, 3, v.id, 3, int8send(v.id),
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
