# The background worker never waits on a session of the application: a
# manual claims_cell.reconcile() left in an open transaction holds the
# lock every pass takes, and used to hold the worker (no queue drained, no
# pass, no verification); a row locked by a session idle in transaction
# used to hold the worker's verification in its re-read FOR SHARE. Now the
# worker skips a pass whose lock is taken, and the verification skips a
# locked row (left for its next run).
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
claims_cell.verify_recent = 0
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
ok($node->poll_query_until('cell1', 'SELECT reconcile_passes >= 1 FROM claims_cell.stats'),
	'the worker runs passes');

# A manual reconcile() in a transaction left open.
my $offset = -s $node->logfile;
my $manual = $node->background_psql('cell1', on_error_stop => 1);
$manual->query_safe(q{BEGIN; SELECT * FROM claims_cell.reconcile()});
ok($node->wait_for_log(qr/reconcile pass skipped: another session's claims_cell.reconcile\(\) holds its lock/, $offset),
	'the worker skips its pass instead of waiting for the lock');
$node->safe_psql('cell1', q{
SET claims_cell.finish_leases_in = 'worker';
INSERT INTO users VALUES (1, 'queued');});
ok( $store->poll_query_until('postgres', q{SELECT status = 'ACTIVE' FROM claims WHERE bucket_value = 'queued'}),
	'and still commits at the store the leases handed to it');
$manual->query_safe('COMMIT');
$manual->quit;
my $passes = $node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats');
ok($node->poll_query_until('cell1', "SELECT reconcile_passes > $passes FROM claims_cell.stats"),
	'passes resume once the manual one has ended');

# A row the worker's verification must repair, locked by a session idle in transaction.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (60, 'ghost');});
my $holder = $node->background_psql('cell1', on_error_stop => 1);
$holder->query_safe(q{BEGIN; SELECT * FROM users WHERE id = 60 FOR UPDATE});
$node->safe_psql('cell1', q{ALTER SYSTEM SET claims_cell.verify_interval = '1s'; SELECT pg_reload_conf();});
ok( $node->poll_query_until('cell1', q{SELECT verify_runs >= 1 FROM claims_cell.stats}),
	'the worker\'s verification runs while the row is locked');
$passes = $node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats');
ok($node->poll_query_until('cell1', "SELECT reconcile_passes >= $passes + 2 FROM claims_cell.stats"),
	'and the worker\'s passes go on');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'ghost'}), '0',
	'the locked row is left for a later run');
$holder->query_safe('COMMIT');
$holder->quit;
ok($store->poll_query_until('postgres', q{SELECT count(*) = 1 FROM claims WHERE bucket_value = 'ghost' AND status = 'ACTIVE'}),
	'once the lock is gone a verification repairs it');

done_testing();
