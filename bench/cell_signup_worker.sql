-- cell_signup_worker: cell_signup.sql's INSERT, run with
-- claims_cell.finish_leases_in = 'worker' (run.sh sets it): the commit
-- callback hands the lease to the background worker instead of calling the
-- store itself.
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
INSERT INTO users_claimed VALUES (:uid, 'u' || :uid, 'u' || :uid || '@example.com', 'u' || :uid || '/profile');
