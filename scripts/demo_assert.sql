-- demo_assert.sql: the one place where a demo step is judged.
--
-- Include it (\ir demo_assert.sql) with the variables ok (a boolean, as
-- \gset leaves it) and outcome (what the step ended with) and expected
-- (what it had to end with). Says "as expected" when ok is true; otherwise
-- stops the demo with an error naming both, so that psql, and with it
-- `make run`, exits non-zero.

\if :ok
\echo '-- as expected:' :outcome
\else
\echo '-- UNEXPECTED:' :outcome 'where the demo expects' :expected
\set ON_ERROR_STOP 1
\set SHOW_CONTEXT never
SELECT format('DO $demo$ BEGIN RAISE EXCEPTION USING MESSAGE = %L; END $demo$',
              format('the demo stopped: %s where it expects %s', :'outcome', :'expected')) \gexec
\endif
