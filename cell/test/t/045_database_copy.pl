# A copy of a cell's database (CREATE DATABASE ... TEMPLATE, as a test
# database cloned from the cell) claims nothing: every claiming statement,
# claim_column, verify() and reconcile() fail with 55000 naming the cell,
# and nothing reaches the store; configure() in the copy makes it a cell of
# its own, unclaiming its columns lets it run without claims.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 3, 'cell-three', 'cell_three' ]);
my $node = cell_node('cells');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users VALUES (1, 'alice');
});
is( $node->safe_psql('cell1', q{SELECT system_identifier = (SELECT system_identifier FROM pg_control_system())
   AND database_oid = (SELECT oid FROM pg_database WHERE datname = current_database()) FROM claims_cell.configuration}),
	't', 'configure() records the cluster and the database');

sub store_state
{
	return $store->safe_psql('postgres', q{
SELECT (SELECT string_agg(bucket_value || ':' || status || ':' || creator_id, ',' ORDER BY bucket_value) FROM claims)
       || ' / ' || (SELECT count(*) FROM claim_leases)});
}
my $before = store_state();
is($before, 'alice:ACTIVE:1 / 1', 'the store holds alice for cell 1');

$node->safe_psql('postgres', 'CREATE DATABASE copy1 TEMPLATE cell1');
my ($st, $out, $err) = sql_state($node, 'copy1', q{INSERT INTO users VALUES (2, 'bob')});
is($st, '55000', 'an INSERT in the copy fails with 55000');
like($err, qr/this database is a copy of the database of cell 1/, 'the message names the cell');
like($err, qr/HINT:.*claims_cell\.configure\(server_name, cell_id\).*unclaim_column/s,
	'the hint says how to configure the copy or turn claiming off');
($st) = sql_state($node, 'copy1', q{DELETE FROM users WHERE id = 1});
is($st, '55000', 'a DELETE in the copy fails: it must not release the cell\'s value');
($st) = sql_state($node, 'copy1', q{BEGIN; SELECT claims_cell.set_constraints('DEFERRED'); UPDATE users SET username = 'alicia'; COMMIT;});
is($st, '55000', 'deferred changes fail at COMMIT in the copy');
($st) = sql_state($node, 'copy1', q{CREATE TABLE t2 (id int PRIMARY KEY, v text); SELECT claims_cell.claim_column('t2', 'v', 'USERNAMES', 'USER', 'id')});
is($st, '55000', 'claim_column fails in the copy');
($st) = sql_state($node, 'copy1', q{SELECT * FROM claims_cell.verify('users', repair => true)});
is($st, '55000', 'verify() fails in the copy');
($st) = sql_state($node, 'copy1', q{INSERT INTO claims_cell.outstanding_leases (uuid, created_at) VALUES ('00000000-0000-7000-8000-000000000009', now() - interval '1 day');
SET claims_cell.stale_after = 0; SELECT * FROM claims_cell.reconcile(full_scan => true)});
is($st, '55000', 'reconcile() fails in the copy');
is(store_state(), $before, 'nothing reached the store');

# Turning claiming off in the copy (a test or staging database).
$node->safe_psql('copy1', q{SELECT claims_cell.unclaim_column(table_name, column_name) FROM claims_cell.claimed_columns});
($st) = sql_state($node, 'copy1', q{INSERT INTO users VALUES (2, 'bob'); DELETE FROM users WHERE id = 1});
is($st, '00000', 'with its columns unclaimed the copy writes freely');
is(store_state(), $before, 'and still nothing reaches the store');

# Configuring a copy makes it a cell (here: a cell of its own).
$node->safe_psql('postgres', 'CREATE DATABASE copy3 TEMPLATE cell1');
$node->safe_psql('copy3', q{CREATE USER MAPPING FOR CURRENT_USER SERVER topology OPTIONS (user 'cell_three', password_required 'false');
SELECT claims_cell.configure('topology', 3)});
($st) = sql_state($node, 'copy3', q{INSERT INTO users VALUES (3, 'carol')});
is($st, '00000', 'a configured copy claims');
like(store_state(), qr/carol:ACTIVE:3/, 'as its own cell');

# The cell itself is unaffected.
($st) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (4, 'dave')});
is($st, '00000', 'the original cell goes on claiming');
like(store_state(), qr/dave:ACTIVE:1/, 'as cell 1');

done_testing();
