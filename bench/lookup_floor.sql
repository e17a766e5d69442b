-- routing lookup floor: a plain indexed SELECT of the same row by
-- (bucket_type, bucket_digest), the value checked as the API checks it.
\set i random(1, :nlookup)
SELECT uuid, bucket_type, bucket_value, subject_type, subject_id, source_type, source_id,
       user_data, creator_id, lease_uuid, status, created_at, updated_at
FROM claims
WHERE bucket_type = 4 AND bucket_digest = sha256(convert_to('lk_' || :i, 'UTF8'))
  AND bucket_value = 'lk_' || :i;
