--
-- Conflicts between batches: which error each problem raises, the order of
-- precedence when a batch has several (not found, then permission, then
-- permanent, then temporary), the DETAIL listing every value at fault, and
-- all-or-nothing: a failing batch leaves no lease and no claim behind.
--
\set SHOW_CONTEXT never

-- Cell 401 holds "perm" (ACTIVE) and has an outstanding lease creating
-- "temp" and destroying "leaving"; cell 402 holds "theirs" and "theirs2"
-- (ACTIVE) and has an outstanding lease creating "theirs-new"; "none" is
-- unclaimed.
SELECT claims_begin_update(req(401, jsonb_build_array(rec('USERNAMES', 'perm'), rec('USERNAMES', 'leaving')))) ->> 'lease_uuid' AS l1 \gset
SELECT claims_commit(401, :'l1');
SELECT claims_begin_update(req(401, jsonb_build_array(rec('USERNAMES', 'temp')), jsonb_build_array(bkt('USERNAMES', 'leaving')))) ->> 'lease_uuid' AS l401 \gset
SELECT claims_begin_update(req(402, jsonb_build_array(rec('USERNAMES', 'theirs'), rec('USERNAMES', 'theirs2')))) ->> 'lease_uuid' AS l2 \gset
SELECT claims_commit(402, :'l2');
SELECT claims_begin_update(req(402, jsonb_build_array(rec('USERNAMES', 'theirs-new')))) ->> 'lease_uuid' AS l402 \gset
SELECT v AS value, status('USERNAMES', v) FROM unnest(ARRAY['perm', 'temp', 'leaving', 'theirs', 'theirs2', 'theirs-new', 'none']) AS v;
SELECT count(*) AS claims, (SELECT count(*) FROM claim_leases) AS leases FROM claims \gset start_

-- 23505: a create meets a committed claim, another cell's or the cell's own.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'perm')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, jsonb_build_array(rec('USERNAMES', 'perm')))));

-- 55P03: a create meets a value under a lease, another cell's or the cell's
-- own; so does a value being destroyed.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'temp')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, jsonb_build_array(rec('USERNAMES', 'temp')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'leaving')))));

-- Destroys take only the cell's own ACTIVE, unleased claims.
-- P0002: unclaimed.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'none')))));
-- 42501: another cell's claim, committed or still being created.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'theirs')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'theirs-new')))));
-- 55P03: the cell's own claim under its own outstanding lease (creating or
-- destroying).
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'temp')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'leaving')))));

-- Precedence, two problems at a time. Permanent beats temporary.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'temp'), rec('USERNAMES', 'perm')))));
-- Permission beats permanent.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, jsonb_build_array(rec('USERNAMES', 'perm')), jsonb_build_array(bkt('USERNAMES', 'theirs')))));
-- Permission beats temporary.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, jsonb_build_array(rec('USERNAMES', 'theirs-new')), jsonb_build_array(bkt('USERNAMES', 'theirs')))));
-- Not found beats permission.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]', jsonb_build_array(bkt('USERNAMES', 'theirs'), bkt('USERNAMES', 'none')))));
-- Not found beats permanent and temporary.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, jsonb_build_array(rec('USERNAMES', 'perm'), rec('USERNAMES', 'theirs-new')), jsonb_build_array(bkt('USERNAMES', 'none')))));

-- All four at once, plus good entries: P0002 naming the unclaimed value; the
-- DETAIL lists every value at fault in request order (creates, then
-- destroys) with its kind, and none of the good ones (destroying its own
-- "perm" would be fine for cell 401).
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401,
    jsonb_build_array(rec('ROUTES', 'fine/1'), rec('USERNAMES', 'theirs-new'), rec('USERNAMES', 'theirs'),
                      rec('EMAILS', 'fine@example.com')),
    jsonb_build_array(bkt('USERNAMES', 'perm'), bkt('USERNAMES', 'theirs2'), bkt('EMAILS', 'none@example.com'),
                      bkt('USERNAMES', 'none')))));
-- The message names the first value of the winning kind in request order.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]',
    jsonb_build_array(bkt('ROUTES', 'none/b'), bkt('ROUTES', 'none/a')))));
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403,
    jsonb_build_array(rec('USERNAMES', 'theirs'), rec('USERNAMES', 'perm'), rec('USERNAMES', 'temp')))));
-- Values of any bucket type are named by type name and value.
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(401, '[]',
    jsonb_build_array(bkt('PROJECT_IDS', '12'), bkt('PAGES_DOMAINS', 'x.example.com')))));

-- None of these calls left a lease or a claim; the good values of the big
-- batch are still unclaimed.
SELECT count(*) = :start_claims AS claims_unchanged,
       (SELECT count(*) FROM claim_leases) = :start_leases AS leases_unchanged
FROM claims;
SELECT status('ROUTES', 'fine/1'), status('EMAILS', 'fine@example.com');
SELECT count(*) AS leases_of_403 FROM claim_leases WHERE creator_id = 403;

-- One bad entry among many good ones: no lease, no claim.
SELECT claims_state() AS s \gset
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403,
    (SELECT jsonb_agg(rec('ROUTES', 'batch/' || i, i, 'RAILS_TABLE_ROUTES', i)) FROM generate_series(1, 50) AS i)
    || jsonb_build_array(rec('USERNAMES', 'perm')))));
SELECT claims_state() = :'s' AS unchanged,
       (SELECT count(*) FROM claims WHERE bucket_value LIKE 'batch/%') AS batch_rows,
       status('ROUTES', 'batch/1') AS first, status('ROUTES', 'batch/50') AS last;
-- Without the bad entry the same 50 go through in one lease.
SELECT claims_begin_update(req(403,
    (SELECT jsonb_agg(rec('ROUTES', 'batch/' || i, i, 'RAILS_TABLE_ROUTES', i)) FROM generate_series(1, 50) AS i)))
    ->> 'lease_uuid' AS l403 \gset
SELECT count(*) AS batch_rows, count(DISTINCT lease_uuid) AS leases, bool_and(lease_uuid = :'l403') AS all_under_l403
FROM claims WHERE bucket_value LIKE 'batch/%';
SELECT cardinality(claim_types) AS keys FROM claim_leases WHERE uuid = :'l403';
SELECT claims_rollback(403, :'l403');
SELECT count(*) AS batch_rows FROM claims WHERE bucket_value LIKE 'batch/%';

-- A temporary conflict clears when the holding lease finishes: after cell
-- 402 rolls back "theirs-new" another cell may take it, and after cell 401
-- commits, "temp" is permanent and "leaving" is free.
SELECT claims_rollback(402, :'l402');
SELECT claims_commit(401, :'l401');
SELECT claims_begin_update(req(403, jsonb_build_array(rec('USERNAMES', 'theirs-new'), rec('USERNAMES', 'leaving')))) ->> 'cell_id' AS cell;
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'temp')))));
SELECT v AS value, status('USERNAMES', v) FROM unnest(ARRAY['perm', 'temp', 'leaving', 'theirs', 'theirs2', 'theirs-new', 'none']) AS v;

-- The DETAIL's line for machines (common/refusal.h) escapes "%", ";" and
-- control characters, so it stays one line whatever the values hold.
SELECT claims_begin_update(req(401, jsonb_build_array(rec('USERNAMES', E'odd;50%\nline')))) ->> 'lease_uuid' AS lodd \gset
SELECT claims_commit(401, :'lodd');
SELECT expect_error(format('SELECT claims_begin_update(%L)', req(403, jsonb_build_array(rec('USERNAMES', 'perm'), rec('USERNAMES', E'odd;50%\nline')))));
