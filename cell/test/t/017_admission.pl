# Admission control is for new leases: finishing a lease already taken is
# never refused by a full claims_cell.max_concurrent_calls nor by an open
# circuit breaker. And a burst of fresh sessions of two cells racing for
# the same values: connecting does not eat the call's deadline nor open
# the breaker, every value ends with exactly one owner, no lease is left
# outstanding.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ],
	[ 3, 'cell-three', 'cell_three' ], [ 4, 'cell-four', 'cell_four' ]);

# A cell with room for one call in flight, whose breaker opens after one
# failed call and stays open for a minute, without early probes.
my $node = cell_node('cell', qq{
claims_cell.max_concurrent_calls = 1
claims_cell.breaker_threshold = 1
claims_cell.breaker_cooldown = '60s'
claims_cell.breaker_probe_interval = 0
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE emails (id bigint PRIMARY KEY, email text);
SELECT claims_cell.claim_column('emails', 'email', 'EMAILS', 'USER', 'id', 'RAILS_TABLE_EMAILS');
});

# Cell 2 leases a value in a store transaction left open: a begin_update
# of cell 1 for the same value waits behind it. Returns the session.
sub hold_at_store
{
	my ($value) = @_;
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-h', $store->host, '-p', $store->port, '-d', 'postgres' ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	$s{in} .= qq{BEGIN;
SET ROLE cell_two;
SELECT claims_begin_update('{"cell_id": 2, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": 99}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 99}}]}') IS NOT NULL AS held;
};
	$s{h}->pump until $s{out} =~ /\bt\b/;
	return \%s;
}

# End the store transaction of hold_at_store (rolled back).
sub release_at_store
{
	my ($s) = @_;
	$s->{in} .= "ROLLBACK;\n\\q\n";
	$s->{h}->finish;
	return;
}

# An interactive psql session on cell1.
sub session
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-v', 'VERBOSITY=verbose', '-h', $node->host, '-p', $node->port,
			'-d', 'cell1' ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# Send SQL to a session and wait (bounded) until it printed the marker.
sub send_wait
{
	my ($s, $sql, $marker) = @_;
	my $timer = IPC::Run::timer(60);
	$s->{in} .= "$sql\nSELECT '$marker';\n";
	$s->{h}->pump while $s->{out} !~ /\Q$marker\E/ && $s->{h}->pumpable && !$timer->is_expired;
	return $s->{out} =~ /\Q$marker\E/;
}

# A value written behind the triggers (missing at the store), repaired by
# verify() in an open transaction of a new session: the session holds the
# repair's lease.
sub session_with_lease
{
	my ($id, $value) = @_;
	$node->safe_psql('cell1', qq{
SET session_replication_role = replica;
INSERT INTO users VALUES ($id, '$value');
});
	my $s = session();
	send_wait($s, q{BEGIN;
SET LOCAL claims_cell.verify_recent = 0;
SELECT 'repaired=' || repaired FROM claims_cell.verify('users', true);}, 'leased');
	like($s->{out}, qr/repaired=1/, "the session holds the lease of $value");
	return $s;
}

# The store's claim of a value: "status:creator", or ''.
sub store_claim
{
	my ($value) = @_;
	return $store->safe_psql('postgres',
		qq{SELECT status || ':' || creator_id FROM claims WHERE bucket_value = '$value'});
}

# Leases of cells still outstanding at the store.
sub outstanding
{
	my ($cells) = @_;
	return $store->safe_psql('postgres',
		"SELECT count(*) FROM claim_leases WHERE creator_id IN ($cells) AND state = 'outstanding'");
}

# --- The cap is full: a call waits at the store behind cell 2's lease.
my $v1 = session_with_lease(1, 'cap-repair');
my $hold = hold_at_store('held');
my $w = session();
$w->{in} .= "SET claims_cell.call_timeout = '60s';\nINSERT INTO users VALUES (10, 'held');\n";
$w->{h}->pump_nb;
ok( $store->poll_query_until('postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'cell_one' AND wait_event_type = 'Lock'}),
	'a call of the cell waits at the store');
is($node->safe_psql('cell1', 'SELECT in_flight FROM claims_cell.stats'), '1',
	'it fills max_concurrent_calls = 1');
ok(send_wait($v1, 'COMMIT;', 'committed'), 'the COMMIT of the lease holder returns');
unlike($v1->{err}, qr/could not commit/, 'without a WARNING: its claims_commit was admitted');
is(store_claim('cap-repair'), 'ACTIVE:1', 'the value is committed at the store');
is($node->safe_psql('cell1', 'SELECT in_flight FROM claims_cell.stats'), '1',
	'the waiting call still fills the cap');
release_at_store($hold);
ok(send_wait($w, '', 'w-done'), 'the waiting INSERT ends');
is($w->{err}, '', 'and commits');

# --- The breaker is open. Two sessions hold leases: one of users, one of
# emails (verify() works on one table at a time).
my $v2 = session_with_lease(2, 'open-repair');
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO emails VALUES (3, 'rolled@repair');
});
my $v3 = session();
send_wait($v3, q{BEGIN;
SET LOCAL claims_cell.verify_recent = 0;
SELECT 'repaired=' || repaired FROM claims_cell.verify('emails', true);}, 'leased');
like($v3->{out}, qr/repaired=1/, 'another session holds the lease of rolled@repair');

# A begin_update times out behind cell 2's lease and opens the breaker;
# the store ends the abandoned statement itself once the cell dropped its
# connection (the lease it waited for is still held).
$hold = hold_at_store('blocked');
my ($ret, $out, $err) = $node->psql('cell1', "INSERT INTO users VALUES (20, 'blocked')");
like($err, qr/did not answer within claims_cell.call_timeout|circuit breaker is open/,
	'a claim fails: the store does not answer in time');
ok( $store->poll_query_until('postgres', q{
SELECT count(*) = 0 FROM pg_stat_activity WHERE usename = 'cell_one' AND wait_event_type = 'Lock'}),
	'the abandoned begin_update ends at the store');
release_at_store($hold);
is($node->safe_psql('cell1', 'SELECT breaker_state FROM claims_cell.stats'), 'open',
	'the breaker is open');
($ret, $out, $err) = $node->psql('cell1', q{INSERT INTO users VALUES (21, 'refused')});
like($err, qr/circuit breaker is open/, 'a new claim is refused by the open breaker');

ok(send_wait($v2, 'COMMIT;', 'committed'), 'the COMMIT of a lease holder returns');
unlike($v2->{err}, qr/could not commit/,
	'without a WARNING: the open breaker admitted its claims_commit');
is(store_claim('open-repair'), 'ACTIVE:1', 'the value is committed at the store');
ok(send_wait($v3, 'ROLLBACK;', 'rolled'), 'the ROLLBACK of a lease holder returns');
unlike($v3->{err}, qr/could not roll back/,
	'without a WARNING: the open breaker admitted its claims_rollback');
is(store_claim('rolled@repair'), '', 'the value is not claimed');
is( $node->safe_psql('cell1', q{
SELECT sqlstate FROM claims_cell.store_finish_lease('topology', 1, '00000000-0000-7000-8000-000000000000', false)}),
	'P0002', 'store_finish_lease (reconcile) reaches the store through the open breaker');
is($node->safe_psql('cell1', 'SELECT breaker_state FROM claims_cell.stats'), 'open',
	'finishing calls do not close the breaker');
is(outstanding('1'), '0', 'no lease of cell 1 is outstanding at the store');
$_->{in} .= "\\q\n" for $v1, $v2, $v3, $w;
$_->{h}->finish for $v1, $v2, $v3, $w;
$node->stop;

# --- A burst: 60 fresh sessions of two cell databases at once, each pair
# racing for one of 30 values. Every new store session takes two seconds
# to start (post_auth_delay: a busy store's sessions are slow to start
# under such a burst): a fresh backend's first call pays for it under
# connect_timeout, not within call_timeout, and the breaker stays closed.
# (A breaker that opens stays open for 10 min, not the default 5 s, so that
# checking it is open at the end races nothing.)
my $burst = cell_node('burst', "claims_cell.verify_interval = 0\nclaims_cell.call_timeout = '1s'\n"
	  . "claims_cell.breaker_probe_interval = 0\nclaims_cell.breaker_cooldown = '10min'\n");
for ([ 'burst3', 3, 'cell_three' ], [ 'burst4', 4, 'cell_four' ])
{
	my ($db, $id, $role) = @$_;
	add_cell(node => $burst, store => $store, db => $db, cell_id => $id, role => $role, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
ALTER SERVER topology OPTIONS (ADD options '-c post_auth_delay=2');
});
}
my @runs;
for my $i (1 .. 30)
{
	for my $db (qw(burst3 burst4))
	{
		my %r = (db => $db, i => $i, out => '', err => '');
		$r{h} = IPC::Run::start(
			[ 'psql', '-X', '-v', 'VERBOSITY=verbose', '-h', $burst->host, '-p', $burst->port,
				'-d', $db, '-c', "INSERT INTO users VALUES ($i, 'race-$i')" ],
			'>', \$r{out}, '2>', \$r{err}, IPC::Run::timeout(120));
		push @runs, \%r;
	}
}
for my $r (@runs)
{
	eval { $r->{h}->finish; };
	$r->{err} .= "(timed out)" if $@;
}
my @unreachable = grep { $_->{err} =~ /08006|timed out/ } @runs;
is(scalar @unreachable, 0, 'no session of the burst fails to reach the store')
  or diag(join('', map { "$_->{db} race-$_->{i}: $_->{err}" } @unreachable[0 .. 2]));
my $others = join('', map {
	my @codes = $_->{err} =~ /ERROR:\s+([0-9A-Z]{5}):/g;
	(grep { $_ ne '23505' && $_ ne '55P03' } @codes) ? "$_->{db} race-$_->{i}: $_->{err}" : ''
} @runs);
is($others, '', 'the losers fail with 23505 or 55P03, nothing else fails');

# Every value: one owner at the store, the one cell that holds the row.
my %rows;
for my $db (qw(burst3 burst4))
{
	my $id = substr($db, -1);
	$rows{$_} .= $id for split /\n/,
	  $burst->safe_psql($db, q{SELECT username FROM users WHERE username LIKE 'race-%'});
}
my %claims = map { split /\|/ } split /\n/, $store->safe_psql('postgres', q{
SELECT bucket_value, string_agg(creator_id::text || ':' || status, ',') FROM claims
 WHERE bucket_value LIKE 'race-%' GROUP BY bucket_value});
my @wrong = grep {
	my $v = "race-$_";
	!defined $rows{$v} || length($rows{$v}) != 1 || ($claims{$v} // '') ne "$rows{$v}:ACTIVE"
} 1 .. 30;
is(scalar @wrong, 0, 'every value has exactly one owner, the cell that committed its row')
  or diag(join("\n", map { "race-$_: rows " . ($rows{"race-$_"} // '-') . ', claims ' . ($claims{"race-$_"} // '-') } @wrong));

ok( $store->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM claim_leases WHERE creator_id IN (3, 4) AND state = 'outstanding'"),
	'no lease of the burst stays outstanding at the store');
is($burst->safe_psql($_, 'SELECT breaker_state FROM claims_cell.stats'), 'closed',
	"the breaker of $_ is closed")
  for qw(burst3 burst4);

# A connection slower than claims_cell.connect_timeout fails the call but
# does not open the breaker: six fresh sessions fail to connect in time.
for my $i (1 .. 6)
{
	my ($ret, $out, $err) = $burst->psql('burst3',
		"SET claims_cell.connect_timeout = '200ms'; INSERT INTO users VALUES (100 + $i, 'slow-$i')");
	like($err, qr/could not connect to the claims store at \S+ within claims_cell.connect_timeout \(200 ms\)/,
		"slow connection $i: the claim fails with the connect bound named");
}
is($burst->safe_psql('burst3', 'SELECT breaker_state FROM claims_cell.stats'), 'closed',
	'slow connections leave the breaker closed');
is(outstanding('3'), '0', 'and leave no lease at the store');

# A refused connection still counts towards opening the breaker: five
# calls (claims_cell.breaker_threshold) whose two tries were refused.
my $nowhere = PostgreSQL::Test::Cluster::get_free_port();
$burst->safe_psql('burst4', "ALTER SERVER topology OPTIONS (SET port '$nowhere')");
$burst->psql('burst4', "INSERT INTO users VALUES (200 + $_, 'refused-$_')") for 1 .. 5;
is($burst->safe_psql('burst4', 'SELECT breaker_state FROM claims_cell.stats'), 'open',
	'refused connections open the breaker');

$burst->stop;
$store->stop;
done_testing();
