-- demo_expect.sql: the check after each step of the demo scripts.
--
-- Include it (\ir demo_expect.sql) right after a step, with the variable
-- expect set to the SQLSTATE the step must end with (00000: it succeeds);
-- demo_assert.sql says so, or stops the demo.

\set outcome 'SQLSTATE ' :SQLSTATE
\set expected 'SQLSTATE ' :expect
\set demo_echo :ECHO
\set ECHO none
\set QUIET on
SELECT :'outcome' = :'expected' AS ok \gset
\set QUIET off
\ir demo_assert.sql
\set ECHO :demo_echo
