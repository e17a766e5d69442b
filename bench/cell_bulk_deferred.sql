-- cell_bulk_deferred: cell_bulk into the deferred table (leased at COMMIT).
\set n :n + 1
\set base :run * 100000000000 + :client_id * 100000000 + :n * 1000
INSERT INTO users_deferred
SELECT CAST(:base AS bigint) + g, 'u' || (CAST(:base AS bigint) + g), 'u' || (CAST(:base AS bigint) + g) || '@example.com', 'u' || (CAST(:base AS bigint) + g) || '/profile'
  FROM generate_series(1, 1000) g;
