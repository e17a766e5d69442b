# The background worker: rows of committed leases gone within seconds of
# the COMMIT, a pass at once when the store's NOTIFY claims_stale_leases
# names the cell (the interval is an hour, so nothing else can run it),
# leases finished by the worker with claims_cell.finish_leases_in =
# 'worker' (commit and rollback; a full queue falls back to the callback),
# counters in claims_cell.stats, a pass
# every interval, the LISTEN connection back after the store restarts,
# DROP DATABASE of the cell's database not held up, a restart.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
# report stale leases (one second old) every second
$store->append_conf('postgresql.conf', qq{
claims.stale_lease_threshold = 1
claims.report_interval = 1
});
$store->reload;

my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1h'
claims_cell.stale_after = 1
claims_cell.cleanup_after = 0
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'claims_cell worker'}),
	'the launcher runs');
ok($node->wait_for_log(qr/background worker serving database "cell1"/),
	'it found its database');
ok($node->wait_for_log(qr/listening for stale lease reports of the claims store at/),
	'a cycle published the store options and the launcher listens');

# A lease taken at the store for a cell directly; returns its uuid.
sub store_begin
{
	my ($cell, $role, $value, $id) = @_;
	return $store->safe_psql('postgres', qq{
SET ROLE $role;
SELECT claims_begin_update('{"cell_id": $cell, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": $id}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": $id}}]}') ->> 'lease_uuid'});
}

sub store_state
{
	my ($uuid) = @_;
	return $store->safe_psql('postgres', "SELECT state FROM claim_leases WHERE uuid = '$uuid'");
}

# Rows of committed leases: the worker deletes them, while the backend
# that committed stays connected and writes nothing more.
my $session = $node->background_psql('cell1', on_error_stop => 0);
$session->query_safe(q{INSERT INTO users VALUES (1, 'alice')});
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'the row of a lease committed in the callback is gone without another transaction');
is( $store->safe_psql('postgres',
		q{SELECT creator_id || ' ' || status FROM claims WHERE bucket_value = 'alice'}),
	'1 ACTIVE', 'the value is claimed for the cell');

# Push: a lease at the store without a local row, stale after a second;
# the store's reporter names cell 1 and the worker settles it (fence in
# one pass, rollback in the next) long before the hour-long interval.
my $offset = -s $node->logfile;
my $lost = store_begin(1, 'cell_one', 'lost', 99);
ok($node->wait_for_log(qr/the claims store reports stale leases of cell 1; reconciling now/, $offset),
	'the NOTIFY naming the cell starts a pass');
ok( $store->poll_query_until('postgres', "SELECT state = 'rolled_back' FROM claim_leases WHERE uuid = '$lost'"),
	'the lease without a local row is rolled back by passes the notifications started');
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'and its fence is gone');
ok( $node->poll_query_until('cell1',
		'SELECT reconcile_passes >= 2 AND reconcile_rolled_back >= 1 AND last_reconcile IS NOT NULL FROM claims_cell.stats'),
	'claims_cell.stats counts the passes');

# finish_leases_in = 'worker': the COMMIT callback hands the lease over.
$session->query_safe(q{SET claims_cell.finish_leases_in = 'worker'});
my $before = $node->safe_psql('cell1', 'SELECT commits FROM claims_cell.stats');
$session->query_safe(q{INSERT INTO users VALUES (2, 'bob')});
ok( $store->poll_query_until('postgres',
		q{SELECT l.state = 'committed' FROM claim_leases l WHERE l.payload::text LIKE '%"bob"%'}),
	'worker mode: the worker commits the lease at the store');
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'worker mode: and deletes its local row');
cmp_ok($node->safe_psql('cell1', 'SELECT commits FROM claims_cell.stats'), '>', $before,
	'worker mode: the commit is counted');

# worker mode, abort: three leases of two records; the last value is
# another cell's, so the transaction fails after two leases were taken.
my $owned = store_begin(2, 'cell_two', 'taken', 5);
$store->safe_psql('postgres', "SET ROLE cell_two; SELECT claims_commit(2, '$owned')");
$session->query_safe(q{SET claims_cell.max_batch_size = 2});
my ($ok, $out) = (1, '');
eval {
	$session->query_safe(q{INSERT INTO users VALUES (3, 'carol'), (4, 'dave'), (5, 'erin'), (6, 'frank'), (7, 'taken')});
	1;
} or $ok = 0;
is($ok, 0, 'worker mode: a transaction whose last lease is refused fails');
is( $store->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM claim_leases WHERE creator_id = 1 AND payload::text LIKE '%"carol"%'}),
	't', 'worker mode: a lease of the failed transaction was taken at the store');
ok( $store->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'worker mode: the worker rolls the taken leases back');
is( $store->safe_psql('postgres',
		q{SELECT count(*) FROM claims WHERE bucket_value IN ('carol', 'dave', 'erin', 'frank')}),
	'0', 'worker mode: nothing of the failed transaction stays claimed');
$session->quit;

# The periodic pass: a short interval settles a lost lease with no notify
# (the store's reporter is slowed down to an hour).
$store->append_conf('postgresql.conf', "claims.report_interval = 3600\n");
$store->reload;
$node->append_conf('postgresql.conf', "claims_cell.reconcile_interval = 1\n");
$node->reload;
my $lost2 = store_begin(1, 'cell_one', 'lost2', 98);
ok( $store->poll_query_until('postgres', "SELECT state = 'rolled_back' FROM claim_leases WHERE uuid = '$lost2'"),
	'passes every reconcile_interval settle a lost lease');

# The store goes away and comes back: the worker listens again.
$offset = -s $node->logfile;
$store->stop;
ok($node->wait_for_log(qr/LISTEN connection to the claims store .* was lost|could not listen for stale lease reports/, $offset),
	'the worker notices the store is gone');
$store->start;
ok($node->wait_for_log(qr/listening for stale lease reports of the claims store at/, $offset),
	'and listens again once it is back');
$node->safe_psql('cell1', q{INSERT INTO users VALUES (8, 'gina')});
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'claims work again after the store restarted');

# A full queue: with the launcher stopped (SIGSTOP) nothing drains it, so
# after 4096 leases handed over in worker mode the callbacks must fall back
# to committing at the store themselves; once the launcher runs again the
# queued leases are committed too and every row goes.
my $launcher = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'claims_cell worker'});
kill 'STOP', $launcher;
# a cycle started before the stop drains until it has been idle a second
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'claims_cell worker cycle'}),
	'the launcher is stopped and no worker cycle runs');
$node->safe_psql('cell1', q{
CREATE PROCEDURE fill(n int) LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1 .. n LOOP
        INSERT INTO users VALUES (100000 + i, 'q' || i);
        COMMIT;
    END LOOP;
END $$;
SET claims_cell.finish_leases_in = 'worker';
CALL fill(4200);
});
my $q_committed = q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'committed' AND payload::text LIKE '%"q%'};
is($store->safe_psql('postgres', $q_committed), 4200 - 4096,
	'queue full: the commit callbacks committed the leases that did not fit');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'4096', 'the 4096 queued leases wait for the stopped worker');
kill 'CONT', $launcher;
ok($store->poll_query_until('postgres', "SELECT ($q_committed) = 4200"),
	'once the worker runs again every queued lease is committed');
ok( $node->poll_query_until('cell1', 'SELECT count(*) = 0 FROM claims_cell.outstanding_leases'),
	'and every lease row is gone');

# A restart: the worker comes back and the cell works.
$node->restart;
ok( $node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'claims_cell worker'}),
	'the launcher runs after a restart');

# DROP DATABASE is not held up by the cycles of a one-second interval.
$offset = -s $node->logfile;
my ($rc, $stdout, $stderr) = $node->psql('postgres', 'DROP DATABASE cell1');
is($rc, 0, 'DROP DATABASE of the cell database succeeds while the worker runs')
  or diag $stderr;
ok($node->wait_for_log(qr/database "cell1" does not exist; the background worker waits/, $offset),
	'the worker says it waits for the database');

$node->stop;
$store->stop;
done_testing();
