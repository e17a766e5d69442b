-- Consistency check for operators: one row per violated invariant of the
-- data model, nothing when the store is healthy. Run it after an incident
-- (crash, failover, restore, manual repair), together with amcheck on the
-- indexes. One snapshot, set-based: a few sequential scans of claims and
-- claim_leases, whatever their size; only the claims under a lease and the
-- keys of outstanding leases are joined row by row.
CREATE OR REPLACE FUNCTION @extschema@.claims_check()
RETURNS TABLE (invariant text, detail text, claim_uuid uuid, lease_uuid uuid)
LANGUAGE sql STABLE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $claims_check$
WITH leased AS MATERIALIZED (
    -- claims currently under a lease (normally few)
    SELECT c.uuid, c.lease_uuid, c.creator_id, c.bucket_type, c.bucket_digest, c.status
    FROM @extschema@.claims c
    WHERE c.lease_uuid IS NOT NULL
), open_leases AS MATERIALIZED (
    SELECT l.uuid, l.creator_id, l.payload, l.claim_types, l.claim_digests, l.creates_only
    FROM @extschema@.claim_leases l
    WHERE l.state = 'outstanding'
), open_keys AS MATERIALIZED (
    -- every key an outstanding lease says it holds
    SELECT o.uuid AS lease_uuid, o.creator_id, k.bucket_type, k.bucket_digest
    FROM open_leases o
    CROSS JOIN LATERAL ROWS FROM (pg_catalog.unnest(o.claim_types), pg_catalog.unnest(o.claim_digests))
        AS k(bucket_type, bucket_digest)
), unmatched AS MATERIALIZED (
    -- keys of outstanding leases and leased claims that do not pair up; a
    -- full join on equality runs as a hash or merge join, never row by row
    SELECT k.lease_uuid AS k_lease, k.bucket_type AS k_type, k.bucket_digest AS k_digest,
           c.uuid AS c_uuid, c.lease_uuid AS c_lease, c.bucket_type AS c_type,
           c.bucket_digest AS c_digest
    FROM open_keys k
    FULL JOIN leased c
      ON c.lease_uuid = k.lease_uuid AND c.bucket_type = k.bucket_type
     AND c.bucket_digest = k.bucket_digest
    WHERE k.lease_uuid IS NULL OR c.uuid IS NULL
), claim_rows AS (
    -- row-local checks of every claim; details are built for failing rows only
    SELECT c.uuid, c.lease_uuid, c.status, c.bucket_type, c.bucket_value,
           c.subject_type, c.subject_id, c.source_type,
           c.replace_subject_type, c.replace_source_type,
           (c.lease_uuid IS NULL) <> (c.status = 'ACTIVE') AS bad_status,
           (c.replace_subject_type IS NOT NULL OR c.replace_subject_id IS NOT NULL
            OR c.replace_source_type IS NOT NULL OR c.replace_source_id IS NOT NULL
            OR c.replace_user_data IS NOT NULL) AS has_replace,
           (c.replace_subject_type IS NULL OR c.replace_subject_id IS NULL
            OR c.replace_source_type IS NULL OR c.replace_source_id IS NULL
            OR pg_catalog.octet_length(c.replace_source_id) NOT BETWEEN 1 AND 128) AS replace_incomplete,
           (pg_catalog.octet_length(c.bucket_digest) <> 32
            OR c.bucket_digest <> pg_catalog.sha256(pg_catalog.convert_to(
                   c.bucket_value, pg_catalog.getdatabaseencoding()))) AS bad_digest,
           (pg_catalog.char_length(c.bucket_value) NOT BETWEEN 1 AND 1024) AS bad_length,
           (bt.integer_valued AND NOT CASE
                WHEN c.bucket_value ~ '^(0|-?[1-9][0-9]{0,18})$'
                THEN c.bucket_value::numeric BETWEEN -9223372036854775808 AND 9223372036854775807
                ELSE false END) AS bad_integer,
           bt.type_id IS NULL AS bad_bucket_type,
           st.type_id IS NULL AS bad_subject_type,
           so.type_id IS NULL AS bad_source_type,
           (c.replace_subject_type IS NOT NULL AND rst.type_id IS NULL) AS bad_replace_subject_type,
           (c.replace_source_type IS NOT NULL AND rso.type_id IS NULL) AS bad_replace_source_type,
           (c.subject_id = 0) AS bad_subject_id,
           (c.creator_id <= 0) AS bad_creator
    FROM @extschema@.claims c
    LEFT JOIN @extschema@.claim_bucket_types bt ON bt.type_id = c.bucket_type
    LEFT JOIN @extschema@.claim_subject_types st ON st.type_id = c.subject_type
    LEFT JOIN @extschema@.claim_source_types so ON so.type_id = c.source_type
    LEFT JOIN @extschema@.claim_subject_types rst ON rst.type_id = c.replace_subject_type
    LEFT JOIN @extschema@.claim_source_types rso ON rso.type_id = c.replace_source_type
)
SELECT v.invariant, v.detail, r.uuid, r.lease_uuid
FROM claim_rows r
CROSS JOIN LATERAL (VALUES
    ('claim_status_lease_mismatch', r.bad_status,
     pg_catalog.format('status %s but lease_uuid %s', r.status,
                       coalesce(r.lease_uuid::text, 'NULL'))),
    ('claim_replace_without_lease', r.has_replace AND r.lease_uuid IS NULL,
     'replace columns are set on a claim no lease holds'),
    ('claim_replace_not_destroying', r.has_replace AND r.lease_uuid IS NOT NULL
                                     AND r.status <> 'LEASE_DESTROYING',
     pg_catalog.format('replace columns are set on a row in status %s', r.status)),
    ('claim_replace_incomplete', r.has_replace AND r.replace_incomplete,
     'replace subject or source is partly missing'),
    ('claim_digest_mismatch', r.bad_digest,
     'bucket_digest is not the SHA-256 of bucket_value'),
    ('claim_value_length', r.bad_length,
     pg_catalog.format('value of %s characters', pg_catalog.char_length(r.bucket_value))),
    ('claim_value_not_canonical_integer', coalesce(r.bad_integer, false),
     pg_catalog.format('bucket type %s holds integers; value %L', r.bucket_type,
                       pg_catalog.left(r.bucket_value, 64))),
    ('unregistered_bucket_type', r.bad_bucket_type,
     pg_catalog.format('bucket_type %s', r.bucket_type)),
    ('unregistered_subject_type', r.bad_subject_type,
     pg_catalog.format('subject_type %s', r.subject_type)),
    ('unregistered_source_type', r.bad_source_type,
     pg_catalog.format('source_type %s', r.source_type)),
    ('unregistered_subject_type', r.bad_replace_subject_type,
     pg_catalog.format('replace_subject_type %s', r.replace_subject_type)),
    ('unregistered_source_type', r.bad_replace_source_type,
     pg_catalog.format('replace_source_type %s', r.replace_source_type)),
    ('claim_subject_unset', r.bad_subject_id, 'subject_id is 0'),
    ('claim_creator_invalid', r.bad_creator, 'creator_id is not a cell number')
) AS v(invariant, failed, detail)
WHERE (r.bad_status OR r.has_replace OR r.bad_digest OR r.bad_length
       OR coalesce(r.bad_integer, false) OR r.bad_bucket_type OR r.bad_subject_type
       OR r.bad_source_type OR r.bad_replace_subject_type OR r.bad_replace_source_type
       OR r.bad_subject_id OR r.bad_creator)
  AND v.failed

UNION ALL
-- a leased claim whose lease does not exist or is finished
SELECT CASE WHEN l.uuid IS NULL THEN 'claim_lease_missing' ELSE 'claim_lease_not_outstanding' END,
       CASE WHEN l.uuid IS NULL THEN pg_catalog.format('%s row under a lease that does not exist', c.status)
            ELSE pg_catalog.format('%s row under a %s lease', c.status, l.state) END,
       c.uuid, c.lease_uuid
FROM leased c
LEFT JOIN @extschema@.claim_leases l ON l.uuid = c.lease_uuid
WHERE l.uuid IS NULL OR l.state <> 'outstanding'

UNION ALL
-- an outstanding lease holding a claim of another cell
SELECT 'lease_holds_other_cells_claim',
       pg_catalog.format('lease of cell %s holds a claim of cell %s', o.creator_id, c.creator_id),
       c.uuid, c.lease_uuid
FROM leased c
JOIN open_leases o ON o.uuid = c.lease_uuid
WHERE o.creator_id <> c.creator_id

UNION ALL
-- a lease marked creates-only (finished by the short statements) holding a
-- claim it destroys or replaces
SELECT 'lease_creates_only_mismatch',
       'creates-only lease holds a LEASE_DESTROYING row',
       c.uuid, c.lease_uuid
FROM leased c
JOIN open_leases o ON o.uuid = c.lease_uuid
WHERE o.creates_only AND c.status = 'LEASE_DESTROYING'

UNION ALL
-- a claim under an outstanding lease that does not list its key
SELECT 'claim_not_listed_in_lease',
       pg_catalog.format('bucket_type %s, digest %s is not among the lease''s claim keys',
                         m.c_type, pg_catalog.encode(m.c_digest, 'hex')),
       m.c_uuid, m.c_lease
FROM unmatched m
JOIN open_leases o ON o.uuid = m.c_lease
WHERE m.k_lease IS NULL

UNION ALL
-- lost lease: an outstanding lease lists a key whose claim row it does not hold
SELECT 'lost_lease',
       CASE WHEN c.uuid IS NULL
            THEN pg_catalog.format('bucket_type %s, digest %s has no claim row',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'))
            WHEN c.lease_uuid IS NULL
            THEN pg_catalog.format('bucket_type %s, digest %s is ACTIVE, under no lease',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'))
            ELSE pg_catalog.format('bucket_type %s, digest %s is under lease %s',
                                   m.k_type, pg_catalog.encode(m.k_digest, 'hex'), c.lease_uuid)
       END,
       c.uuid, m.k_lease
FROM unmatched m
LEFT JOIN @extschema@.claims c
  ON c.bucket_type = m.k_type AND c.bucket_digest = m.k_digest
WHERE m.c_uuid IS NULL

UNION ALL
-- an outstanding lease listing one key twice, or a malformed key
SELECT 'lease_keys_malformed', d.why, NULL::uuid, d.lease_uuid
FROM (
    SELECT k.lease_uuid,
           pg_catalog.format('key bucket_type %s, digest %s listed %s times',
                             k.bucket_type, pg_catalog.encode(k.bucket_digest, 'hex'),
                             pg_catalog.count(*)) AS why
    FROM open_keys k
    GROUP BY k.lease_uuid, k.bucket_type, k.bucket_digest
    HAVING pg_catalog.count(*) > 1
    UNION ALL
    SELECT k.lease_uuid, 'a key has a NULL part or a digest that is not 32 bytes'
    FROM open_keys k
    WHERE k.bucket_type IS NULL OR k.bucket_digest IS NULL
       OR pg_catalog.octet_length(k.bucket_digest) <> 32
    GROUP BY k.lease_uuid
    UNION ALL
    SELECT o.uuid, pg_catalog.format('%s claim types but %s claim digests',
                                     pg_catalog.cardinality(o.claim_types),
                                     pg_catalog.cardinality(o.claim_digests))
    FROM open_leases o
    WHERE pg_catalog.cardinality(o.claim_types) <> pg_catalog.cardinality(o.claim_digests)
    UNION ALL
    SELECT o.uuid, 'an outstanding lease without keys'
    FROM open_leases o
    WHERE pg_catalog.cardinality(o.claim_types) = 0
) d

UNION ALL
-- an outstanding lease whose stored request names another cell
SELECT 'lease_payload_cell_mismatch',
       pg_catalog.format('lease of cell %s stores a request of cell_id %s',
                         o.creator_id, coalesce(o.payload->'cell_id', o.payload->'cellId')),
       NULL::uuid, o.uuid
FROM open_leases o
WHERE NOT (CASE WHEN pg_catalog.jsonb_typeof(coalesce(o.payload->'cell_id', o.payload->'cellId'))
                     IN ('number', 'string')
                 AND coalesce(o.payload->>'cell_id', o.payload->>'cellId') ~ '^\+?[0-9]{1,19}(\.0*)?$'
                THEN coalesce(o.payload->>'cell_id', o.payload->>'cellId')::numeric = o.creator_id
                ELSE false END)

UNION ALL
-- lease state and finished_at must agree
SELECT 'lease_finished_at_mismatch',
       CASE WHEN l.state = 'outstanding' THEN 'outstanding lease with finished_at set'
            ELSE pg_catalog.format('%s lease without finished_at', l.state) END,
       NULL::uuid, l.uuid
FROM @extschema@.claim_leases l
WHERE (l.state = 'outstanding') <> (l.finished_at IS NULL)

ORDER BY 1, 4, 3
$claims_check$;

COMMENT ON FUNCTION @extschema@.claims_check() IS
    'Consistency check: one row per violated invariant of claims and claim_leases; empty when healthy';
REVOKE ALL ON FUNCTION @extschema@.claims_check() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @extschema@.claims_check() TO claims_admin;
