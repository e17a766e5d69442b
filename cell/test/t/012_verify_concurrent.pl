# claims_cell.verify() with repair, looping while 4 clients insert, rename
# and delete claimed rows through the triggers, with verify_recent = 0 (no
# recency protection at all): a change committed while a batch is compared
# must never be taken for drift. Afterwards, settled by reconcile() and
# without another repair, the store holds exactly the table's claims.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{CLAIMS_SEED} // time;
srand($seed);
note("seed $seed (CLAIMS_SEED)");

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users SELECT i, 'seed' || i FROM generate_series(1, 3000) i;
});

# One client's statements, each its own transaction; errors (a value under
# verify's lease: 55P03) are allowed and leave the row as it was.
sub client_script
{
	my ($c) = @_;
	my $sql = "\\set ON_ERROR_STOP 0\n";
	for my $n (1 .. 3000)
	{
		my $id = 1 + int(rand(3500));
		my $op = rand();
		if ($op < 0.4)
		{
			$sql .= "UPDATE users SET username = 'r$c-$n' WHERE id = $id;\n";
		}
		elsif ($op < 0.7)
		{
			$sql .= "INSERT INTO users VALUES ($id, 'i$c-$n') ON CONFLICT (id) DO UPDATE SET username = EXCLUDED.username;\n";
		}
		else
		{
			$sql .= "DELETE FROM users WHERE id = $id;\n";
		}
	}
	return $sql;
}

my @clients;
for my $c (1 .. 4)
{
	my $file = $PostgreSQL::Test::Utils::tmp_check . "/verify_client_$c.sql";
	PostgreSQL::Test::Utils::append_to_file($file, client_script($c));
	my %h = (out => '', err => '');
	$h{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-h', $node->host, '-p', $node->port, '-d', 'cell1', '-f', $file ],
		'<', \undef, '>', \$h{out}, '2>', \$h{err});
	push @clients, \%h;
}

my ($passes, $failed, $found, $repaired, $in_flight) = (0, 0, 0, 0, 0);
while (grep { $_->{h}->pumpable } @clients)
{
	$_->{h}->pump_nb for grep { $_->{h}->pumpable } @clients;
	# call_timeout: on a machine this busy a listing of 1000 records can
	# take more than 300 ms; the test is about races, not deadlines
	my ($rc, $out, $err) = $node->psql('cell1',
		q{SET claims_cell.verify_recent = 0; SET claims_cell.call_timeout = '10s';
SELECT * FROM claims_cell.verify('users', true)});
	$passes++;
	if ($rc != 0)
	{
		$failed++;
		diag("verify failed: $err");
	}
	else
	{
		my @n = split /\|/, $out;
		$found += $n[0] + $n[1] + $n[2];
		$repaired += $n[3];
		$in_flight += $n[4];
	}
}
$_->{h}->finish for @clients;
ok($passes >= 3, "verify with repair ran $passes times while the clients wrote");
is($failed, 0, 'no verify failed');
cmp_ok($in_flight, '>', 0, "verify met $in_flight values in flight");

# Settle what the clients' failed commits left, then compare without repair
# (bounded by the usual test timeout, not by 40 tries).
my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $give_up)
{
	$node->safe_psql('cell1', q{
SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0; SET claims_cell.orphan_after = 0;
SELECT * FROM claims_cell.reconcile(true)});
	last if $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}) eq '0';
	Time::HiRes::usleep(250_000);
}
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'0', 'no lease is left outstanding');
is($found, 0, 'verify never took a change in flight for drift');
is($repaired, 0, 'and so repaired nothing');
my $store_claims = $store->safe_psql('postgres', q{
SELECT string_agg(bucket_value || ':' || subject_id, ',' ORDER BY bucket_value) FROM claims WHERE creator_id = 1});
my $cell_claims = $node->safe_psql('cell1', q{
SELECT string_agg(username || ':' || id, ',' ORDER BY username COLLATE "C") FROM users});
ok($store_claims eq $cell_claims, 'the store holds exactly the table\'s claims')
  or diag("store and cell differ in " . scalar(grep { 1 } split /,/, $store_claims) . " / "
	  . scalar(grep { 1 } split /,/, $cell_claims) . " claims");
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'0|0|0|0|0', 'and verify agrees');

done_testing();
