-- cell_signup_hand: the same signup with the lease protocol done by hand
-- (bench_hand_signup in cell_setup.sql). lease: the previous signup's
-- lease, whose row this one deletes (pgbench -D lease=<zero uuid> first).
\set n :n + 1
\set uid :run * 100000000000 + :client_id * 100000000 + :n
CALL bench_hand_signup(:uid, :lease, NULL) \gset
