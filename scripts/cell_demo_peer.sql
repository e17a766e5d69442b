-- cell_demo_peer.sql: one step of cell_demo.sql run by cell 2.
--
-- Included by cell_demo.sql (in cell 1's session) with the variables sql
-- (the statements cell 2 runs, in one psql -c) and expect (the SQLSTATE
-- they must end with, 00000 for success). Cell 2's own psql session
-- ($CELL_2_PSQL, which echoes what it runs) checks its outcome with
-- demo_expect.sql and exits non-zero when it is not the expected one; its
-- output is shown here, and a non-zero exit stops the demo.

\set peer_echo :ECHO
\set ECHO none
\setenv CELL_SQL :sql
\setenv CELL_EXPECT :expect
\set peer_status `$CELL_2_PSQL -v expect="$CELL_EXPECT" -c "$CELL_SQL" -c '\set ON_ERROR_STOP 1' -f "$CLAIMS_DEMO_DIR/demo_expect.sql" >"$CLAIMS_DEMO_PEER_LOG" 2>&1; echo $?`
\! sed 's/^/    cell 2| /' "$CLAIMS_DEMO_PEER_LOG"
\set outcome 'cell 2''s psql status ' :peer_status
\set expected 'cell 2''s psql status 0'
\set QUIET on
SELECT :'peer_status' = '0' AS ok \gset
\set QUIET off
\ir demo_assert.sql
\set ECHO :peer_echo
