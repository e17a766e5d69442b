# A session left idle in transaction after an immediate claim must not stop
# the background worker. Its statement took the lease at the store; its
# local lease row stays uncommitted. Once the lease is older than
# stale_after, reconcile() places a fence for it; the fence's insert used
# to wait on that transaction with no bound, holding reconcile's advisory
# lock, so the worker ran no pass, drained no queue ('worker' commits stayed
# outstanding at the store) and a manual reconcile() blocked. Now the fence
# skips a lease whose row a running transaction still writes and comes back
# to it in a later pass.
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
claims_cell.stale_after = 1
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
ok($node->poll_query_until('cell1', 'SELECT reconcile_passes >= 1 FROM claims_cell.stats'),
	'the worker runs passes');

# The console left open after a claiming statement.
my $idle = $node->background_psql('cell1', on_error_stop => 1);
$idle->query_safe(q{BEGIN; INSERT INTO users VALUES (1, 'idle')});
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}), '1',
	'the INSERT leased its value at the store; its transaction stays open');
ok( $store->poll_query_until('postgres', q{
SELECT bool_and(l.created_at < now() - interval '2 seconds')
  FROM claim_leases l WHERE l.creator_id = 1 AND l.state = 'outstanding'}),
	'the lease is older than stale_after');

# The worker's passes go on past it: two more passes than when it went stale.
my $passes = $node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats');
ok($node->poll_query_until('cell1', "SELECT reconcile_passes >= $passes + 2 FROM claims_cell.stats"),
	'the worker keeps running passes while the session is idle in transaction');
is($node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases WHERE fence'), '0',
	'no fence was placed for the lease its writer still holds');

# The worker still drains the leases handed to it.
$node->safe_psql('cell1', q{
SET claims_cell.finish_leases_in = 'worker';
INSERT INTO users VALUES (2, 'queued');});
ok( $store->poll_query_until('postgres', q{SELECT status = 'ACTIVE' FROM claims WHERE bucket_value = 'queued'}),
	'a commit handed to the worker is committed at the store');

# A manual reconcile() does not block on the advisory lock or the fence.
my ($st, $out, $err) = sql_state($node, 'cell1',
	q{SET statement_timeout = '120s'; SELECT pending >= 1 FROM claims_cell.reconcile()});
is($st, '00000', 'a manual reconcile() returns') or diag($err);
like($out, qr/^t$/m, 'and counts the idle transaction\'s lease as pending');

# The session ends: its COMMIT commits the lease, nothing is left.
$idle->query_safe('COMMIT');
$idle->quit;
is($store->safe_psql('postgres', q{SELECT status || ':' || creator_id FROM claims WHERE bucket_value = 'idle'}),
	'ACTIVE:1', 'the idle transaction\'s COMMIT committed its lease');
ok( $store->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'no lease of the cell stays outstanding');
ok($node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'and no local lease row');
is($node->safe_psql('cell1', q{SELECT sum(missing + extra + drifted) FROM claims_cell.verify('users')}), '0',
	'verify() finds the cell and the store in agreement');

# A session that rolls back after going stale: its lease is rolled back.
$idle = $node->background_psql('cell1', on_error_stop => 1);
$idle->query_safe(q{BEGIN; INSERT INTO users VALUES (3, 'abandoned')});
ok( $store->poll_query_until('postgres', q{
SELECT count(*) = 1 AND bool_and(l.created_at < now() - interval '2 seconds')
  FROM claim_leases l WHERE l.creator_id = 1 AND l.state = 'outstanding'}),
	'a second idle transaction\'s lease goes stale');
$passes = $node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats');
ok($node->poll_query_until('cell1', "SELECT reconcile_passes >= $passes + 2 FROM claims_cell.stats"),
	'passes go on past it too');
$idle->query_safe('ROLLBACK');
$idle->quit;
ok( $store->poll_query_until('postgres', q{SELECT NOT EXISTS (SELECT 1 FROM claims WHERE bucket_value = 'abandoned')}),
	'its rolled-back lease leaves the value unclaimed');

done_testing();
