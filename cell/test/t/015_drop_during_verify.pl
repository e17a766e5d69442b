# DROP DATABASE of the cell's database while the background worker
# verifies a table. DROP DATABASE waits 5 s for other sessions to leave;
# the worker's scheduled verification used to run a slice of about 10 s
# in one transaction without looking up, and DROP failed with 55006. The
# worker now verifies one batch per transaction and yields between two
# batches to a session that waits for the database. The table's rows were
# written without the claims triggers, so every batch repairs claims at
# the store and the whole verification takes well over 10 s.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = 1
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SET session_replication_role = replica;
INSERT INTO users SELECT i, 'user' || i FROM generate_series(1, 100000) i;
});
is($store->safe_psql('postgres', 'SELECT count(*) FROM claims'), '0',
	'the rows are not claimed at the store');

# Scheduled verifications every second: the table is due at once.
my $offset = -s $node->logfile;
$node->append_conf('postgresql.conf', "claims_cell.verify_interval = 1\n");
$node->reload;
ok( $node->poll_query_until('cell1', q{
SELECT count(*) > 0 FROM pg_stat_activity
 WHERE backend_type = 'claims_cell worker cycle' AND query = 'claims_cell: verify'}),
	'the worker verifies the table');
ok($store->poll_query_until('postgres', 'SELECT count(*) > 0 FROM claims'),
	'and repairs it at the store');
ok(!$node->log_contains(qr/claims_cell: verified table public\.users/, $offset),
	'the verification is not finished');

my ($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE cell1');
is($rc, 0, 'DROP DATABASE succeeds while the worker verifies') or diag $stderr;
ok($node->wait_for_log(qr/database "cell1" does not exist; the background worker waits/, $offset),
	'the worker says it waits for the database');

$node->stop;
$store->stop;
done_testing();
