# claims_cell.stats.reconcile_failures: every reconcile() pass of the
# background worker that fails (here: the store refuses the cell's role)
# is counted, exactly once, and passes that succeed are not; the view
# names the cell (cell_id) for a pg_monitor member, and gives the count and
# total time of the calls that reached the store.
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
claims_cell.reconcile_interval = '1s'
claims_cell.breaker_threshold = 1000
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1);
$node->safe_psql('postgres', 'CREATE ROLE monitor LOGIN IN ROLE pg_monitor');

sub cell_stat
{
	my ($col) = @_;
	return $node->safe_psql('cell1', "SET ROLE monitor; SELECT $col FROM claims_cell.stats");
}

ok($node->poll_query_until('cell1', 'SELECT reconcile_passes >= 2 FROM claims_cell.stats'),
	'the worker finishes passes');
is(cell_stat('reconcile_failures || \' \' || cell_id'), '0 1',
	'none failed; a pg_monitor member reads the counter and the cell id');

# The store refuses the cell's role: every pass fails when it lists the
# cell's leases; each failed pass ends its cycle worker with exit code 1.
my $offset = -s $node->logfile;
$store->safe_psql('postgres', q{
ALTER ROLE cell_one NOLOGIN;
SELECT count(pg_terminate_backend(pid)) >= 0 FROM pg_stat_activity WHERE usename = 'cell_one';
});
ok($node->poll_query_until('cell1', 'SELECT reconcile_failures >= 3 FROM claims_cell.stats'),
	'failed passes are counted');
$store->safe_psql('postgres', 'ALTER ROLE cell_one LOGIN');
my $passes = cell_stat('reconcile_passes');
ok($node->poll_query_until('cell1', "SELECT reconcile_passes > $passes + 1 FROM claims_cell.stats"),
	'passes succeed again');
my $failures = cell_stat('reconcile_failures');
my $log = slurp_file($node->logfile, $offset);
my $exits = () = $log =~ /background worker "claims_cell worker cycle" \(PID \d+\) exited with exit code 1/g;
is($failures, $exits, "reconcile_failures is the number of failed passes ($exits)");
ok($node->poll_query_until('cell1', "SELECT reconcile_passes > $passes + 3 FROM claims_cell.stats"),
	'more passes succeed');
is(cell_stat('reconcile_failures'), $failures, 'and successful passes count no failure');

# The calls' durations: a count and a sum whose ratio is the average.
is( cell_stat(q{latency_count > 0 AND latency_sum_ms > 0
	  AND abs(latency_sum_ms / latency_count - avg_latency_ms) < 1e-9 * avg_latency_ms
	  AND latency_count <= calls}),
	't', 'latency_count and latency_sum_ms: the calls that reached the store and their average');

done_testing();
