# Random transactions on three cells (two on one cell server, one on
# another) racing for a small pool of values over several claimed tables:
# two tables sharing the bucket type USERNAMES (one immediate, one deferred),
# a delegated role's table (deferrable, initially immediate), a partitioned
# table (declared through its parent when claim_column takes one, else per
# partition) and a table whose column is retired during the run
# (unclaim_column, set_claiming false, DROP COLUMN or DROP TABLE). The
# transactions mix INSERT, UPDATE of claimed and unclaimed columns, DELETE,
# TRUNCATE, COPY, MERGE, INSERT ... ON CONFLICT, savepoints, DO blocks with
# exception handlers, PREPARE TRANSACTION, set_constraints() and every
# isolation level (CellFuzz.pm). Meanwhile faults hit at random moments:
# SIGKILL of a cell server or of the store, the store frozen with SIGSTOP,
# pg_cancel_backend of a client, reconcile() with stale_after = 0 fencing
# leases in flight, statement_timeout inside transactions. Then, with the
# faults stopped, reconcile() settles every cell, verify(repair => true)
# runs on every claimed table, and the invariants are checked by reading
# every cell's tables and the store's tables (CellFuzz::check_invariants).
# CLAIMS_FUZZ_SECONDS (default 180) is the length of the run; CLAIMS_SEED
# replays the transactions and the order of the faults, not their timing.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use lib "$FindBin::RealBin/../../../test/perl";
use CellNodes;
use CellFuzz;
use ClaimsFault qw(claims_seed env_int crash_node run_children become_subreaper);
use JSON::PP ();
use List::Util ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);

my $seed = claims_seed();
become_subreaper();
my $seconds = env_int('CLAIMS_FUZZ_SECONDS', 180);
my $clients_per_cell = 2;
sub now { return Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()); }
my $started = now();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ],
	[ 3, 'cell-three', 'cell_three' ]);
$store->append_conf('postgresql.conf', "max_connections = 100\n");
$store->restart;
my $conf = qq{
claims_cell.reconcile_interval = 1
max_prepared_transactions = 10
max_connections = 40
};
my $node_a = cell_node('cella', "claims_cell.database = 'cell1'\n$conf");
my $node_b = cell_node('cellb', "claims_cell.database = 'cell3'\n$conf");
$_->safe_psql('postgres', 'CREATE ROLE app LOGIN') for $node_a, $node_b;
my @cells = ([ 1, $node_a, 'cell1', 'cell_one' ], [ 2, $node_a, 'cell2', 'cell_two' ],
	[ 3, $node_b, 'cell3', 'cell_three' ]);
my %setup;
for my $c (@cells)
{
	my ($id, $node, $db, $role) = @$c;
	add_cell(node => $node, store => $store, db => $db, role => $role, cell_id => $id);
	# cell 3 declares its partitions one by one, as before 1.5
	$setup{$id} = setup_fuzz_schema($node, $db, $id == 3 ? 'partitions' : 'parent');
}

# The partitioned table: declared through its parent at cells 1 and 2,
# partition by partition at cell 3.
is(join(',', map { $setup{$_}{partitioned} } 1 .. 3), 'parent,parent,partitions',
	'the partitioned table is claimed through its parent at cells 1 and 2, by partition at cell 3')
  or diag($setup{1}{parent_error});
# An inheritance child of a claimed table is refused (060_inheritance.pl).
is(join(',', map { $setup{$_}{inherit_state} } 1 .. 3), '0A000,0A000,0A000',
	'an inheritance child of a claimed table is refused') or diag($setup{1}{inherit_error});

# The legacy table's column is retired in a different way in each cell.
my @ways = List::Util::shuffle(qw(unclaim pause drop_column drop_table));
my %retire = map { $_->[0] => { how => $ways[ $_->[0] - 1 ], at => $started + $seconds * (0.2 + rand(0.4)) } } @cells;
diag('legacy retired by: ' . join(', ', map { "cell $_: $retire{$_}{how}" } sort keys %retire));

# The clients, each with its own stream of choices.
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/random_invariants";
mkdir $dir;
my $stop_file = "$dir/stop";
my $deadline = $started + $seconds;
my @clients;
for my $c (@cells)
{
	push @clients, [ @$c, $_ ] for 1 .. $clients_per_cell;
}
my $k = 0;
my @pids = run_children(sub {
	my ($cl) = @_;
	my ($id, $node, $db, undef, $n, $index) = @$cl;
	srand($seed * 37 + $index);
	run_client(connstr => $node->connstr($db) . " application_name=fuzz_c${id}_$n",
		deadline => $deadline, stop_file => $stop_file, gid_prefix => "fuzz_c${id}_${n}_",
		out_file => "$dir/client_c${id}_$n.json");
}, map { [ @$_, $k++ ] } @clients);

# The faults, one at a time, until the deadline.
my %faults;
my @nodes = ([ 'cella', $node_a ], [ 'cellb', $node_b ]);
while (now() < $deadline)
{
	sleep(0.3 + rand(1.5));
	for my $id (sort keys %retire)
	{
		my $r = $retire{$id};
		next if $r->{done} || now() < $r->{at};
		my (undef, $node, $db) = @{ $cells[ $id - 1 ] };
		my $st = retire_legacy($node, $db, $r->{how});
		$r->{done} = 1 if $st eq '00000';
		$faults{"retire_$r->{how}"}++ if $st eq '00000';
	}
	my $r = rand();
	if ($r < 0.12)
	{
		my ($name, $node) = @{ $nodes[ int(rand(2)) ] };
		crash_node($node, whole => 1);
		$node->start;
		$faults{"kill9_$name"}++;
	}
	elsif ($r < 0.20)
	{
		crash_node($store, whole => 1);
		sleep(rand(1.0));
		$store->start;
		$faults{kill9_store}++;
	}
	elsif ($r < 0.30)
	{
		my @frozen = freeze_node($store, 30);
		sleep(0.5 + rand(3));
		thaw_node(@frozen);
		$faults{freeze_store}++;
	}
	elsif ($r < 0.60)
	{
		my (undef, $node) = @{ $nodes[ int(rand(2)) ] };
		my ($rc, $out) = $node->psql('postgres', q{
SELECT count(pg_cancel_backend(pid)) FROM (SELECT pid FROM pg_stat_activity
 WHERE application_name LIKE 'fuzz%' AND state = 'active' ORDER BY random() LIMIT 1) s});
		$faults{cancel}++ if $rc == 0 && $out eq '1';
	}
	elsif ($r < 0.80)
	{
		my (undef, $node, $db) = @{ $cells[ int(rand(3)) ] };
		my ($rc) = $node->psql($db, 'SET claims_cell.stale_after = 0; SELECT * FROM claims_cell.reconcile()');
		$faults{ $rc == 0 ? 'reconcile_fencing' : 'reconcile_failed' }++;
	}
}
open my $fh, '>', $stop_file or die "$stop_file: $!";
close $fh;
waitpid($_, 0) for @pids;
my $run_seconds = now() - $started;

# Whatever is still prepared (a client gone between PREPARE and COMMIT PREPARED) is committed.
for my $n (@nodes)
{
	my $node = $n->[1];
	for my $line (grep { $_ ne '' } split /\n/, $node->safe_psql('postgres', 'SELECT database, gid FROM pg_prepared_xacts'))
	{
		my ($db, $gid) = split /\|/, $line;
		$node->safe_psql($db, "COMMIT PREPARED '$gid'");
	}
}
for my $id (sort keys %retire)
{
	next if $retire{$id}{done};
	my (undef, $node, $db) = @{ $cells[ $id - 1 ] };
	is(retire_legacy($node, $db, $retire{$id}{how}), '00000', "cell $id: legacy retired ($retire{$id}{how}) after the run");
}

# The figures of the clients.
my %fig;
for my $f (glob "$dir/client_*.json")
{
	my $c = JSON::PP->new->decode(slurp_file($f));
	for my $key (keys %$c)
	{
		if (ref $c->{$key}) { $fig{$key}{$_} += $c->{$key}{$_} for keys %{ $c->{$key} }; }
		else { $fig{$key} += $c->{$key}; }
	}
}
is(scalar(my @f = glob "$dir/client_*.json"), scalar(@clients), 'every client finished and reported');
cmp_ok($fig{committed} // 0, '>', 0, "the clients committed transactions");
diag(sprintf('transactions: %d in %.0f s: %d committed, %d rolled back, %d failed, %d in doubt, %d lost; '
		. '%d prepared, %d PREPAREs refused with 0A000; %d reconnects',
		map({ $fig{$_} // 0 } qw(transactions)), $run_seconds,
		map { $fig{$_} // 0 } qw(committed rolled_back failed in_doubt lost prepared prepare_refused reconnects)));
diag('kinds: ' . join(' ', map { "$_=$fig{kinds}{$_}" } sort keys %{ $fig{kinds} // {} }));
diag('SQLSTATEs: ' . join(' ', map { "$_=$fig{states}{$_}" } sort keys %{ $fig{states} // {} }));
diag('faults: ' . join(' ', map { "$_=$faults{$_}" } sort keys %faults));

# Settle: the worker and reconcile() finish what the faults left.
for my $c (@cells)
{
	my ($id, $node, $db) = @$c;
	my ($ok, $last) = settle_cell($node, $db);
	ok($ok, "cell $id: reconcile() settles every lease") or diag($last);
}
# Before verify(): the triggers, the commit path and reconcile() alone must
# have left nothing that verify() would have to repair (no row was written
# behind the triggers, no lease was lost: a SIGKILL loses nothing of a store
# that had written it).
my ($before) = check_invariants($store, @cells);
is(scalar(@$before), 0, 'the invariants hold before verify() too') or diag(join("\n", map { "before verify(): $_" } @$before));
for my $c (@cells)
{
	my ($id, $node, $db) = @$c;
	my @v = verify_cell($node, $db);
	diag("cell $id verify(repair) missing/extra/drifted/repaired/skipped: $_") for grep { !m{: 0/0/0/0/0$} } @v;
	ok(!(grep { /: error/ } @v), "cell $id: verify(repair => true) of every claimed table runs");
	my ($ok, $last) = settle_cell($node, $db);
	ok($ok, "cell $id: nothing outstanding after verify()") or diag($last);
}
my ($bad, $excepted) = check_invariants($store, @cells);
diag("excepted: $_") for @$excepted;
is(scalar(@$bad), 0, 'every invariant holds over the cells and the store') or diag(join("\n", @$bad));

# The checker sees what it looks for: a row written behind the triggers in
# cell 1 with a value nobody owns, and one in cell 2 with a value cell 3 owns.
my $owned = $store->safe_psql('postgres', q{SELECT bucket_value FROM claims
 WHERE creator_id = 3 AND bucket_type = 4 AND source_type = 1 ORDER BY 1 LIMIT 1});
$node_a->safe_psql('cell1', q{SET session_replication_role = replica; INSERT INTO users VALUES (1001, 'ghost')});
$node_a->safe_psql('cell2', qq{SET session_replication_role = replica; INSERT INTO orgs VALUES (1002, '$owned')})
  if $owned ne '';
($bad) = check_invariants($store, @cells);
ok((grep { /^\(1\) USERNAMES=ghost of cell 1 is not owned by it at the store: cell 1: users\(1001\)/ } @$bad)
	  && ($owned eq '' || grep { /^\(2\) USERNAMES=\Q$owned\E is held by rows of cells 2,3: / } @$bad),
	'the checker reports a row written behind the triggers') or diag(join("\n", @$bad));

diag(sprintf('figures: seed=%d seconds=%.0f transactions=%d committed=%d', $seed, now() - $started,
	$fig{transactions} // 0, $fig{committed} // 0));

$_->stop for $node_a, $node_b, $store;
done_testing();
