-- cell_signup_plain: the same INSERT into an identical table nothing claims.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
INSERT INTO users_plain VALUES (:uid, 'u' || :uid, 'u' || :uid || '@example.com', 'u' || :uid || '/profile');
