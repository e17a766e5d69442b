# The background worker keeps its reconcile interval under steady commits.
# Every commit hands the worker a lease row to delete and wakes its cycle;
# a cycle used to linger for as long as work kept coming, and the launcher
# waited for it: with a commit every 0.3 s no pass ran, no notification
# was read, no reload took effect. Here a session commits every 0.3 s for
# about 20 s with claims_cell.reconcile_interval = 2 s: passes must go on
# during the load, and a lease lost at the store (outstanding without a
# local row, older than stale_after) must be settled during the load.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
# no stale lease reports: only the periodic passes can settle the lost lease
$store->append_conf('postgresql.conf', "claims.report_interval = 3600\n");
$store->reload;
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = 2
claims_cell.stale_after = 1
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
ok( $node->poll_query_until('cell1', 'SELECT reconcile_passes >= 1 FROM claims_cell.stats'),
	'the worker runs passes');

# The load: a commit every 0.3 s, about 20 s long.
my $loader = $node->background_psql('cell1', on_error_stop => 1);
$loader->query_safe(q{SET application_name = 'loader'});
$loader->query_until(qr/load started/, q{
\echo load started
DO $$
BEGIN
    FOR i IN 1 .. 66 LOOP
        INSERT INTO users VALUES (i, 'load' || i);
        COMMIT;
        PERFORM pg_sleep(0.3);
    END LOOP;
END $$;
});
ok( $node->poll_query_until('cell1', q{SELECT count(*) >= 3 FROM users}),
	'the load commits');
my $loading = q{EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = 'loader' AND state = 'active')};
my $passes0 = $node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats');

# A lease outstanding at the store without a local row.
my $lost = $store->safe_psql('postgres', q{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "lost"}, "subject": {"type": "USER", "id": 999}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 999}}]}') ->> 'lease_uuid'});

# Each wait ends when it is met or the load is over.
ok( $node->poll_query_until('cell1',
		"SELECT (SELECT reconcile_passes >= $passes0 + 3 FROM claims_cell.stats) OR NOT $loading"),
	'polled until three more passes or the end of the load');
cmp_ok($node->safe_psql('cell1', 'SELECT reconcile_passes FROM claims_cell.stats'),
	'>=', $passes0 + 3, 'at least three passes ran');
is($node->safe_psql('cell1', "SELECT $loading"), 't', 'while the load goes on');

my $settled = 'f';
for (1 .. 300)
{
	$settled = $store->safe_psql('postgres', "SELECT state = 'rolled_back' FROM claim_leases WHERE uuid = '$lost'");
	last if $settled eq 't' || $node->safe_psql('cell1', "SELECT NOT $loading") eq 't';
	Time::HiRes::usleep(100_000);
}
is($settled, 't', 'the lost lease is rolled back at the store');
is($node->safe_psql('cell1', "SELECT $loading"), 't', 'while the load goes on');

$loader->quit;
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '66', 'every commit of the load went through');
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'no lease row is left');

$node->stop;
$store->stop;
done_testing();
