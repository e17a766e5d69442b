# Crash rounds: four clients claim, rename and delete values of two claimed
# columns drawn from a small pool (so they also conflict with each other;
# two of them hand their leases to the background worker), while a fifth
# runs reconcile() with stale_after = 0 (fencing leases of transactions in
# flight). Then the cell server (even rounds) or the store server (odd
# rounds) is killed with SIGKILL, every process at once, at a random
# moment: between a begin_update and the local commit, between the local
# commit and the store's commit, in a reconcile pass, in the worker. After
# a restart and reconcile passes until nothing is pending, in every round:
# every value in the cell's table is owned by the cell at the store with
# that row as subject, every value the store gives the cell is in the
# table, no lease is outstanding at the store and no lease row is left.
# CLAIMS_FAULT_ROUNDS (default 10), CLAIMS_SEED replays a run.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use lib "$FindBin::RealBin/../../../test/perl";
use CellNodes;
use ClaimsFault qw(claims_seed env_int crash_node server_pids become_subreaper);
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $seed = claims_seed();
become_subreaper();
my $rounds = env_int('CLAIMS_FAULT_ROUNDS', 10);
my $statements = 300;
my $started = time();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = 1
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('users', 'email', 'EMAILS', 'USER', 'id');
});
my $logdir = "${PostgreSQL::Test::Utils::tmp_check}/crash_rounds";
mkdir $logdir;

# One client's script: autocommit statements and small transactions.
sub client_script
{
	my ($worker) = @_;
	my @s = ("\\set VERBOSITY verbose");
	push @s, "SET claims_cell.finish_leases_in = 'worker';" if $worker;
	for (1 .. $statements)
	{
		my $id = 1 + int(rand(16));
		my $u = 'u' . int(rand(24));
		my $e = 'x' . int(rand(24)) . '@example.com';
		my $r = rand();
		if ($r < 0.35) { push @s, "INSERT INTO users VALUES ($id, '$u', '$e');" }
		elsif ($r < 0.55) { push @s, "UPDATE users SET username = '$u' WHERE id = $id;" }
		elsif ($r < 0.70) { push @s, "UPDATE users SET email = '$e' WHERE id = $id;" }
		elsif ($r < 0.85) { push @s, "DELETE FROM users WHERE id = $id;" }
		else
		{
			my $id2 = 1 + int(rand(16));
			push @s, "BEGIN;", "UPDATE users SET username = '$u' WHERE id = $id;",
			  "DELETE FROM users WHERE id = $id2;", "COMMIT;";
		}
	}
	return join("\n", @s) . "\n";
}

my $reconciler = "\\set VERBOSITY verbose\nSET claims_cell.stale_after = 0;\nSET claims_cell.cleanup_after = 0;\n"
  . ("SELECT * FROM claims_cell.reconcile();\n" x 200);

# Start the clients of a round (scripts in files, so that they run without
# being fed); returns their harnesses.
sub start_clients
{
	my ($round) = @_;
	my @h;
	for my $c (0 .. 4)
	{
		my $script = "$logdir/r${round}_c$c.sql";
		open my $fh, '>', $script or die "$script: $!";
		print $fh ($c == 4 ? $reconciler : client_script($c >= 2));
		close $fh;
		push @h, IPC::Run::start(
			[ 'psql', '-X', '-q', '-d', $node->connstr('cell1'), '-f', $script ],
			'>', "$logdir/r${round}_c$c.out", '2>', "$logdir/r${round}_c$c.err",
			IPC::Run::timeout(90));
	}
	return @h;
}

# Wait for the clients to end (their statements run out, or their server
# is gone); kill what is left after the timeout.
sub finish_clients
{
	my (@h) = @_;
	for my $h (@h)
	{
		eval { $h->finish; 1 } or $h->kill_kill;
	}
	return;
}

# Settle: reconcile passes (nothing is in flight now) until none is pending;
# a pass may fail while the cell's circuit breaker, opened by the store's
# outage, cools down.
sub settle
{
	my $out = '';
	# bounded by the usual test timeout: the breaker's cooldown and a
	# loaded machine's slow passes are no reason to give up
	my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $give_up)
	{
		my ($rc, $stdout, $stderr) = $node->psql('cell1', q{
SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0; SET claims_cell.orphan_after = 0;
SELECT * FROM claims_cell.reconcile(true)});
		$out = $rc == 0 ? $stdout : "error: $stderr";
		return $out if $rc == 0 && $out =~ /\|0$/
		  && $node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases') eq '0';
		sleep(0.5);
	}
	return $out;
}

sub local_values
{
	return $node->safe_psql('cell1', q{
SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM (
  SELECT 'USERNAMES:' || username || ':' || id AS v FROM users WHERE btrim(coalesce(username, '')) <> ''
  UNION ALL
  SELECT 'EMAILS:' || email || ':' || id FROM users WHERE btrim(coalesce(email, '')) <> '') s});
}

sub store_values
{
	return $store->safe_psql('postgres', q{
SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM (
  SELECT t.name || ':' || c.bucket_value || ':' || c.subject_id AS v
    FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
   WHERE c.creator_id = 1) s});
}

my (@problems, %outcomes);
my %killed = (cell => 0, store => 0);
for my $round (1 .. $rounds)
{
	my $victim = $round % 2 == 0 ? $store : $node;
	my $name = $round % 2 == 0 ? 'store' : 'cell';
	my @h = start_clients($round);
	sleep(0.3 + rand(1.5));
	crash_node($victim, whole => 1);
	$killed{$name}++;
	if ($name eq 'store')
	{
		# the cell's clients meet an unreachable store for a while
		sleep(rand(1.0));
		$victim->start;
		finish_clients(@h);
	}
	else
	{
		finish_clients(@h);
		crash_node($node) if server_pids($node);
		$node->start;
	}

	for my $c (0 .. 4)
	{
		my $err = slurp_file("$logdir/r${round}_c$c.err");
		$outcomes{$1}++ while $err =~ /ERROR:\s+([0-9A-Z]{5}):/g;
	}
	my $left = settle();
	push @problems, "round $round ($name killed): reconcile still reports $left" unless $left =~ /\|0$/;
	my ($local, $remote) = (local_values(), store_values());
	push @problems, "round $round ($name killed): cell has $local, store has $remote" if $local ne $remote;
	my $outstanding = $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'});
	push @problems, "round $round ($name killed): $outstanding leases outstanding at the store" if $outstanding ne '0';
	my $not_active = $store->safe_psql('postgres',
		q{SELECT count(*) FROM claims WHERE creator_id = 1 AND status <> 'ACTIVE'});
	push @problems, "round $round ($name killed): $not_active claims not ACTIVE" if $not_active ne '0';
	my $rows = $node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases');
	push @problems, "round $round ($name killed): $rows local lease rows left" if $rows ne '0';
	last if @problems > 20;
}

ok($killed{cell} >= 1 && $killed{store} >= 1 && $killed{cell} + $killed{store} == $rounds,
	"the cell killed $killed{cell} times, the store $killed{store} times, with SIGKILL");
cmp_ok(scalar(keys %outcomes), '>', 0, 'the clients met refusals and failures: '
	  . join(' ', map { "$_=$outcomes{$_}" } sort keys %outcomes));
like(local_values(), qr/USERNAMES:u\d+:\d+/, 'the cell holds claimed values at the end');
is(scalar(@problems), 0, 'after every round the cell and the store agree value by value, nothing outstanding')
  or diag(join("\n", @problems));
diag(sprintf('figures: rounds=%d seconds=%.0f seed=%d', $rounds, time() - $started, $seed));

$node->stop;
$store->stop;
done_testing();
