# A COMMIT whose connection to the store was lost connects again; when that
# fresh connection's setup fails (here a 57014 a proxy injects on its SET),
# the store never saw claims_commit: the lease goes to the background
# worker, which commits it at once, as after any other failed try. It is
# not taken for the store's refusal and left for the next reconcile() pass
# (an hour away here).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', q{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1h'
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# The cell reaches the store through the proxy.
my $flag = "$PostgreSQL::Test::Utils::tmp_check/inject_setup_in_commit";
my $proxy = start_inject_proxy($store, $node, 'cell1', $flag);
my $ok;
# until the test timeout: the proxy and a fresh connection through it may be
# slow on a loaded machine, and nothing here is about time
my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
for (my $i = 1; $i < 1000 && time() < $give_up; $i++)
{
	$ok = $node->psql('cell1', "INSERT INTO users VALUES ($i, 'warm$i')") == 0 and last;
	usleep(200_000);
}
ok($ok, 'a claim through the proxy works');

# Wait until a session's SQL has printed the marker.
sub wait_for
{
	my ($s, $marker) = @_;
	$s->{h}->pump until $s->{out} =~ /$marker/ || $s->{err} =~ /ERROR/;
}

my $s = start_session($node, 'cell1', "BEGIN;\nINSERT INTO users VALUES (1000, 'alice');\nSELECT 'inserted';\n");
wait_for($s, 'inserted');
# The store ends the session's connection; the COMMIT's next connection fails its setup once.
my $pids = $store->safe_psql('postgres',
	q{SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE usename = 'cell_one' AND backend_type = 'client backend'});
$store->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN ($pids)");
ok($store->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid IN ($pids)"),
	'the store ended the cell\'s connections');
open my $f, '>', $flag or die "$flag: $!";
close $f;
$s->{in} .= "COMMIT;\nSELECT 'committed';\n";
wait_for($s, 'committed');
$s->{in} .= "\\q\n";
$s->{h}->finish;
ok(!-e $flag, 'the setup error was injected');
like($s->{err}, qr/could not commit lease .*canceling statement due to user request/,
	'the COMMIT reports the failed setup');
like($s->{err}, qr/the background worker commits the lease/, 'and hands the lease to the worker');

# The worker commits it: the local lease row goes and the store holds alice.
my $left;
# the next pass is an hour away (reconcile_interval): the test timeout
# still tells the worker's hand-off from a pass
$give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $give_up)
{
	$left = $node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases');
	last if $left eq '0';
	usleep(200_000);
}
is($left, '0', 'the lease is finished long before the next reconcile() pass');
is( $node->safe_psql('cell1',
		"SET claims_cell.verify_recent = 0; SELECT missing, extra, drifted FROM claims_cell.verify('users')"),
	'0|0|0', 'the store holds every value of the table, alice included');

kill 'TERM', $proxy;
waitpid($proxy, 0);
done_testing();
