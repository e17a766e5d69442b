-- cell_signup: a user with three claimed columns (username, email, route),
-- one INSERT in its own transaction; claims_cell takes the lease at COMMIT.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
INSERT INTO users_claimed VALUES (:uid, 'u' || :uid, 'u' || :uid || '@example.com', 'u' || :uid || '/profile');
