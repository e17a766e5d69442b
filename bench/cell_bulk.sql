-- cell_bulk: 1000 users with three claimed columns in one INSERT ... SELECT
-- (immediate: leased at the end of the statement, one lease per 1000 records).
\set n :n + 1
\set base :run * 100000000000 + :client_id * 100000000 + :n * 1000
INSERT INTO users_claimed
SELECT CAST(:base AS bigint) + g, 'u' || (CAST(:base AS bigint) + g), 'u' || (CAST(:base AS bigint) + g) || '@example.com', 'u' || (CAST(:base AS bigint) + g) || '/profile'
  FROM generate_series(1, 1000) g;
