# A claiming statement during a store hang (every process of the store
# stopped, as a paused VM) fails with 08006 within its bound; the begin it
# gave up sits in the store's socket and runs when the store wakes, leaving
# a lease of the failed transaction outstanding. The abort's rollback could
# not reach the frozen store and went to the worker, which tried once and
# left it to reconcile() (stale_after, 5 min by default): meanwhile the same
# value was refused with 55P03. Now the worker tries a rollback again until
# the store answers, and a rollback in doubt (its begin given up) even after
# the store says the lease is unknown, so the late lease is rolled back as
# soon as it exists.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
# recovery far away: only the worker's queue can roll the late lease back
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = 3600
claims_cell.stale_after = 3600
claims_cell.connect_timeout = '1s'
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# A session with its connection to the store open.
my $s = $node->background_psql('cell1', on_error_stop => 0);
$s->query_safe(q{INSERT INTO users VALUES (1, 'warm')});

my @frozen = freeze_node($store, 120);
my $offset = -s $node->logfile;
my ($out, $failed) = $s->query(q{INSERT INTO users VALUES (2, 'hung')});
my $err = $s->{stderr};
ok($failed, 'the INSERT during the hang fails');
like($err, qr/claims store/,
	'as the store does not answer') or diag($err);
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'hung'}), '0', 'and keeps nothing');
# the worker (its log lines carry no application name) has tried the
# rollback it was handed while the store is frozen
$node->wait_for_log(qr/\] (?:WARNING|LOG):  claims_cell: could not roll back lease/, $offset);
pass('the worker could not roll the lease back while the store was frozen');
thaw_node(@frozen);

# The begin given up runs once the store wakes; the worker rolls it back.
ok( $store->poll_query_until('postgres', q{
SELECT count(*) = 1 FROM claim_leases WHERE payload::text LIKE '%"hung"%' AND state = 'rolled_back'}),
	'the late lease of the failed transaction is rolled back at the store');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'0', 'no lease of the cell stays outstanding');
my ($st, $o, $e) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (3, 'hung')});
is($st, '00000', 'the value is free for the cell again at once') or diag($e);
is($store->safe_psql('postgres', q{SELECT creator_id || ':' || status FROM claims WHERE bucket_value = 'hung'}),
	'1:ACTIVE', 'and claimed for it');
$s->quit;

done_testing();
