-- cell_signup_deferred: cell_signup on a table whose three columns are
-- claimed deferrable initially deferred: the lease is taken at COMMIT.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
INSERT INTO users_deferred VALUES (:uid, 'u' || :uid, 'u' || :uid || '@example.com', 'u' || :uid || '/profile');
