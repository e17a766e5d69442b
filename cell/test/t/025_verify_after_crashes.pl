# claims_cell.verify() after crash rounds: the cell and the store are
# killed with SIGKILL (whole servers, alternately) while four clients claim,
# rename and delete values and a fifth runs reconcile() with
# stale_after = 0; reconcile() settles each round. Then 500 rows are
# written behind the triggers and an administrator removes 50 claims at
# the store: verify() must count exactly those 550 values missing, as it
# does without crashes, repair exactly them, and find nothing afterwards.
# A value it failed to count is named. CLAIMS_FAULT_ROUNDS (default 4),
# CLAIMS_SEED replays a run.
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
my $rounds = env_int('CLAIMS_FAULT_ROUNDS', 4);
my $started = time();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = 1
});
# 100 rows claimed through the triggers before the rounds (ids 1001..1100);
# the clients work on ids 1..16
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('users', 'email', 'EMAILS', 'USER', 'id');
INSERT INTO users SELECT i, 'claimed' || i, 'claimed' || i || '@example.com' FROM generate_series(1001, 1100) i;
});
my $logdir = "${PostgreSQL::Test::Utils::tmp_check}/verify_after_crashes";
mkdir $logdir;

# One client's script: 1000 statements (more than a round lasts),
# autocommit or small transactions.
sub client_script
{
	my ($worker) = @_;
	my @s = ("\\set VERBOSITY verbose");
	push @s, "SET claims_cell.finish_leases_in = 'worker';" if $worker;
	for (1 .. 1000)
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

my $reconciler = "SET claims_cell.stale_after = 0;\nSET claims_cell.cleanup_after = 0;\n"
  . ("SELECT * FROM claims_cell.reconcile();\n" x 1000);

# Start the clients of a round; returns their harnesses.
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

# End the clients: they stop when their server is gone; the others are
# given a moment against the restarted store, then killed.
sub finish_clients
{
	my (@h) = @_;
	sleep(0.5);
	for my $h (@h)
	{
		$h->kill_kill if $h->pumpable;
		eval { $h->finish; 1 };
	}
	return;
}

# Reconcile passes until none is pending and no lease row is left (a pass
# may fail while the breaker the store's outage opened cools down).
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

# The table's claimable values and the store's claims of cell 1, as
# "BUCKET:value:subject:source id hex", one per line, sorted.
sub cell_values
{
	return $node->safe_psql('cell1', q{
SELECT v FROM (
  SELECT 'USERNAMES:' || username || ':' || id || ':' || encode(int8send(id), 'hex') AS v
    FROM users WHERE btrim(coalesce(username, '')) <> ''
  UNION ALL
  SELECT 'EMAILS:' || email || ':' || id || ':' || encode(int8send(id), 'hex')
    FROM users WHERE btrim(coalesce(email, '')) <> '') s ORDER BY v COLLATE "C"});
}

sub store_values
{
	return $store->safe_psql('postgres', q{
SELECT v FROM (
  SELECT t.name || ':' || c.bucket_value || ':' || c.subject_id || ':' || encode(c.source_id, 'hex') AS v
    FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
   WHERE c.creator_id = 1) s ORDER BY v COLLATE "C"});
}

my %killed = (cell => 0, store => 0);
my $under_load = 0;
my @unsettled;
for my $round (1 .. $rounds)
{
	my $victim = $round % 2 == 0 ? $store : $node;
	my $name = $round % 2 == 0 ? 'store' : 'cell';
	my @h = start_clients($round);
	sleep(0.3 + rand(1.0));
	$under_load++ if grep { $_->pumpable } @h;
	crash_node($victim, whole => 1);
	$killed{$name}++;
	if ($name eq 'store')
	{
		sleep(rand(0.5));
		$victim->start;
		finish_clients(@h);
	}
	else
	{
		finish_clients(@h);
		crash_node($node) if server_pids($node);
		$node->start;
	}
	my $left = settle();
	push @unsettled, "round $round ($name killed): $left" unless $left =~ /\|0$/;
}
ok($killed{cell} >= 1 && $killed{store} >= 1,
	"the cell killed $killed{cell} times, the store $killed{store} times, with SIGKILL");
# (a round after the store's may find the breaker still open: its clients
# then fail fast and may be done before the kill)
cmp_ok($under_load, '>=', $rounds / 2, "$under_load of $rounds kills came while the clients were writing");
is(scalar(@unsettled), 0, 'reconcile() settled every round') or diag(join("\n", @unsettled));
is(store_values(), cell_values(), 'after the rounds the store holds exactly the table\'s claims');

# 500 rows behind the triggers (usernames only) and 50 of the claimed rows'
# usernames removed at the store by an administrator (a destroy lease taken
# and committed in the cell's name, as 011_verify.pl does)
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users SELECT i, 'hidden' || i FROM generate_series(2001, 2500) i;
});
$store->safe_psql('postgres', q{
SET ROLE cell_one;
SELECT claims_commit(1, (claims_begin_update(jsonb_build_object('cell_id', 1, 'destroy_records',
  (SELECT jsonb_agg(jsonb_build_object('bucket', jsonb_build_object('type', 'USERNAMES', 'value', 'claimed' || i)))
     FROM generate_series(1001, 1050) i))) ->> 'lease_uuid')::uuid);
});

is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'550|0|0|0|0', 'verify() after crash rounds counts each of the 550 missing values');

# What a crash leaves at the store: a lease outstanding with no local row
# (taken in the cell's name and never finished), here destroying the claim
# of row 1051. Its value is skipped as under a lease; it hides no other.
my $lease = $store->safe_psql('postgres', q{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "claimed1051"}}]}') ->> 'lease_uuid'});
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'550|0|0|0|1', 'a lease a crash left outstanding: its value is skipped, the 550 are counted');
like(settle(), qr/\|0$/, 'reconcile() fences the lease and rolls it back');
is($store->safe_psql('postgres', qq{SELECT state FROM claim_leases WHERE uuid = '$lease'}), 'rolled_back',
	'the lease is rolled back at the store');
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'550|0|0|0|0', 'settled, nothing is skipped and the 550 are counted');
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users', true)}),
	'550|0|0|550|0', 'and repairs each of them');
# a value verify() did not count was not repaired either: name it
my ($cell, $stored) = (cell_values(), store_values());
my %s = map { $_ => 1 } split /\n/, $stored;
my @uncounted = grep { !$s{$_} } split /\n/, $cell;
is(scalar(@uncounted), 0, 'the store holds every value of the table after the repair')
  or diag('not repaired: ' . join(' ', @uncounted[ 0 .. ($#uncounted < 19 ? $#uncounted : 19) ]));
is($stored, $cell, 'and exactly the table\'s values');
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'0|0|0|0|0', 'a second verify() finds nothing');
diag(sprintf('figures: rounds=%d seconds=%.0f seed=%d', $rounds, time() - $started, $seed));

$node->stop;
$store->stop;
done_testing();
