-- contention: one random operation on the hot values (see bench_contend in
-- setup.sql); clients of four cells compete, every outcome is counted.
SELECT bench_contend(:client_id, 1001 + :client_id % 4, :nhot);
