# A store that stops answering without closing its sockets (its postmaster
# and every child stopped with SIGSTOP, as a paused VM): a claiming COMMIT,
# the commit and the rollback of a transaction holding leases return within
# seconds, and a session waiting on the store answers pg_cancel_backend and
# pg_terminate_backend, whether it waits before the commit (interruptible)
# or in the commit callback (interrupts held). Once the store runs again
# everything settles: reconcile() finishes what was left. The store's
# warnings are logged with its address.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(gettimeofday tv_interval usleep);

# How long the store stays frozen at most, and how fast everything must end.
my $freeze_s = 30;
my $bound_s = 10;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
# One source type per table: verify() of each table sees only its claims.
$store->safe_psql('postgres', q{
INSERT INTO claim_source_types (type_id, name) VALUES
  (31, 'RAILS_TABLE_TK'), (32, 'RAILS_TABLE_TR'), (33, 'RAILS_TABLE_TX'), (34, 'RAILS_TABLE_TT');
});
my $node = cell_node('cell', "claims_cell.verify_interval = 0\nclaims_cell.database = 'cell1'\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
} . join('', map { qq{
CREATE TABLE $_ (id bigint PRIMARY KEY, name text);
SELECT claims_cell.claim_column('$_', 'name', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_\U$_\E');
SET session_replication_role = replica;
INSERT INTO $_ VALUES (1, '$_-value');
RESET session_replication_role;
} } qw(tk tr tx tt)));

my @frozen;

# Stop the store's postmaster, then its children (it forks no more).
sub freeze_store
{
	my $pm = $store->{_pid};
	kill 'STOP', $pm or die "cannot stop the store's postmaster $pm";
	my @kids = grep { /^\d+$/ } split /\s+/, `pgrep -P $pm`;
	kill 'STOP', @kids;
	@frozen = ($pm, @kids);
	# thawed after $freeze_s whatever happens to this test
	system("(sleep $freeze_s; kill -CONT @frozen) >/dev/null 2>&1 &");
	note "froze the store: @frozen";
	return;
}

# Let the store run again.
sub thaw_store
{
	kill 'CONT', @frozen if @frozen;
	@frozen = ();
	return;
}

END { thaw_store(); }

# An interactive psql session on cell1 under an application name.
sub session
{
	my ($name) = @_;
	my %s = (name => $name, in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-v', 'VERBOSITY=verbose', '-h', $node->host, '-p', $node->port,
			'-d', "dbname=cell1 application_name=$name" ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# Send SQL followed by a marker query, remembering when.
sub send_sql
{
	my ($s, $sql, $marker) = @_;
	$s->{marker} = $marker;
	$s->{in} .= "$sql\nSELECT '$marker';\n";
	$s->{sent} = [gettimeofday];
	delete $s->{elapsed};
	delete $s->{from};
	return;
}

# Wait (at most $limit seconds in all) until each session printed its
# marker or exited; each one's elapsed time from $s->{from} // $s->{sent}
# goes to $s->{elapsed} (undef: not within the limit).
sub wait_all
{
	my ($limit, @sessions) = @_;
	my $t0 = [gettimeofday];
	my @left = @sessions;
	while (@left && tv_interval($t0) < $limit)
	{
		@left = note_done(@left);
		usleep(50_000) if @left;
	}
	return;
}

# Pump each session once; one that printed its marker or exited and has
# no $s->{elapsed} yet gets it. Returns the sessions not done. Called
# between the other steps too, so that an elapsed time is taken when the
# session ends, not when this test gets round to looking.
sub note_done
{
	my @still;
	for my $s (@_)
	{
		next if defined $s->{elapsed};
		eval { $s->{h}->pump_nb if $s->{h}->pumpable; };
		my $done = $s->{out} =~ /\Q$s->{marker}\E/;
		$done ||= $s->{exits} && !$s->{h}->pumpable;
		if ($done) { $s->{elapsed} = tv_interval($s->{from} // $s->{sent}); }
		else { push @still, $s; }
	}
	return @still;
}

# The sessions whose end note_done watches for while waiting_pid polls.
my @watched;

# Poll (bounded) until the backend of application $name waits in the
# extension on a statement starting with $query; returns its pid or ''.
sub waiting_pid
{
	my ($name, $query) = @_;
	for (1 .. 200)
	{
		my $pid = $node->safe_psql('cell1', qq{
SELECT pid FROM pg_stat_activity WHERE application_name = '$name'
   AND wait_event_type = 'Extension' AND query LIKE '$query%'});
		return $pid if $pid ne '';
		note_done(@watched);
		usleep(50_000);
	}
	return '';
}

# Sessions, each with its connection to the store open.
my $ins = session('a');
send_sql($ins, q{INSERT INTO users VALUES (1, 'a-warm');}, 'a-ready');
my %lease;
for my $t (qw(tk tr tx tt))
{
	$lease{$t} = session($t);
	send_sql($lease{$t},
		($t =~ /tx|tt/ ? "SET claims_cell.call_timeout = '60s';\n" : '')
		  . "BEGIN;\nSET LOCAL claims_cell.verify_recent = 0;\n"
		  . "SELECT 'repaired=' || repaired FROM claims_cell.verify('$t', true);",
		"$t-ready");
}
my $p = session('p');
send_sql($p, qq{SET claims_cell.call_timeout = '60s';\nINSERT INTO users VALUES (3, 'p-warm');},
	'p-ready');
wait_all(60, $ins, $p, values %lease);
for my $s ($ins, $p, values %lease)
{
	ok(defined $s->{elapsed}, "session $s->{name} is ready") or diag($s->{err});
}
like($lease{$_}{out}, qr/repaired=1/, "$_: verify() took a repair lease in the transaction")
  for qw(tk tr tx tt);

# --- The store freezes.
freeze_store();

# A claiming COMMIT (default call_timeout) fails with 08006 in time.
send_sql($ins, q{INSERT INTO users VALUES (2, 'a-frozen');}, 'a-done');
# The commit and the rollback of transactions holding leases.
send_sql($lease{tk}, 'COMMIT;', 'tk-done');
send_sql($lease{tr}, 'ROLLBACK;', 'tr-done');
# Sessions whose calls wait up to 60 s: one in the commit callback to be
# cancelled, one there to be terminated, one taking its lease before the
# commit to be cancelled.
send_sql($lease{tx}, 'COMMIT;', 'tx-done');
send_sql($lease{tt}, 'COMMIT;', 'tt-done');
$lease{tt}{exits} = 1;
send_sql($p, q{INSERT INTO users VALUES (4, 'p-frozen');}, 'p-done');
$_->{h}->pump_nb for $lease{tx}, $lease{tt}, $p;
# the sessions of the default call_timeout end on their own meanwhile
@watched = ($ins, $lease{tk}, $lease{tr});

my $tx_pid = waiting_pid('tx', 'COMMIT');
my $tt_pid = waiting_pid('tt', 'COMMIT');
my $p_pid = waiting_pid('p', 'INSERT');
isnt($tx_pid, '', 'the COMMIT of tx waits on the frozen store');
isnt($tt_pid, '', 'the COMMIT of tt waits on the frozen store');
isnt($p_pid, '', 'the claiming INSERT of p waits on the frozen store');
for ([ $lease{tx}, 'pg_cancel_backend', $tx_pid ], [ $lease{tt}, 'pg_terminate_backend', $tt_pid ],
	[ $p, 'pg_cancel_backend', $p_pid ])
{
	my ($s, $f, $pid) = @$_;
	$s->{from} = [gettimeofday];
	$node->safe_psql('cell1', "SELECT $f($pid)") if $pid ne '';
	push @watched, $s;
	note_done(@watched);
}
wait_all($freeze_s + 10, $ins, $p, values %lease);

for my $s ($ins, $p, values %lease)
{
	my $e = $s->{elapsed};
	# A contract: a frozen store holds a session only for its timeouts (at
	# most the INSERT's 300 ms call, 5 s connect_timeout of the retry and
	# 300 ms rollback, ~5.6 s) or until a cancel; they are wall-clock waits,
	# load adds only scheduling, and elapsed is taken as a session ends.
	ok(defined $e && $e < $bound_s,
		"$s->{name} returns within $bound_s s while the store is frozen ("
		  . (defined $e ? sprintf('%.1f s', $e) : 'not at all') . ')')
	  or diag($s->{err});
}
like($ins->{err}, qr/ERROR:\s+08006:/, 'the claiming INSERT fails with 08006');
like($lease{tk}{err}, qr/WARNING:\s+01000: claims_cell: could not commit lease/,
	'the COMMIT warns that it could not commit its lease');
like($lease{tk}{err}, qr/DETAIL:\s+The local transaction committed; the background worker commits the lease\./,
	'and that it was handed to the background worker');
like($lease{tr}{err}, qr/WARNING:\s+01000: claims_cell: could not roll back lease/,
	'the ROLLBACK warns that its lease could not be rolled back');
like($lease{tr}{err}, qr/DETAIL:\s+The background worker rolls the lease back\./,
	'and that it was handed to the background worker');
like($p->{err}, qr/WARNING:\s+01000: claims_cell: could not roll back lease \S+ at the claims store: not tried/,
	'the cancelled INSERT does not wait to roll back its lease');
like($lease{tx}{err}, qr/WARNING:\s+01000: claims_cell: could not commit lease/,
	'the cancelled COMMIT gives its call up');
like($p->{err}, qr/ERROR:\s+57014: canceling statement due to user request/,
	'the cancelled INSERT is cancelled');
ok( $node->poll_query_until('cell1',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = $tt_pid"),
	'the terminated backend is gone');
is( $node->safe_psql('cell1',
		q{SELECT (SELECT count(*) FROM tk) || ',' || (SELECT count(*) FROM tx) || ',' || (SELECT count(*) FROM tt) || ',' || (SELECT count(*) FROM users WHERE id IN (2, 4))}),
	'1,1,1,0', 'the local commits happened; the failed claims left no row');
# Row locks are free again: another session updates the committed rows.
is($node->psql('cell1', q{SET lock_timeout = '5s'; UPDATE tk SET id = id; UPDATE tx SET id = id}),
	0, 'no row lock is left behind');

# --- The store runs again: everything settles.
thaw_store();
$_->{in} .= "\\q\n" for $ins, $p, values %lease;
$_->{h}->finish for $ins, $p, $lease{tk}, $lease{tr}, $lease{tx};
eval { $lease{tt}{h}->finish };
my $settled = 0;
for (1 .. 60)
{
	my ($ret, $out, $err) = $node->psql('cell1', q{
SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0;
SELECT * FROM claims_cell.reconcile()});
	my $left = $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'});
	if ($ret == 0 && $left eq '0') { $settled = 1; last; }
	usleep(500_000);
}
ok($settled, 'reconcile() runs and leaves no lease outstanding at the store');
is( $store->safe_psql('postgres', q{
SELECT string_agg(bucket_value || ':' || status, ',' ORDER BY bucket_value) FROM claims
 WHERE bucket_value IN ('tk-value', 'tr-value', 'tx-value', 'tt-value', 'a-frozen', 'p-frozen')}),
	'tk-value:ACTIVE,tt-value:ACTIVE,tx-value:ACTIVE',
	'the committed repairs are claimed, the rolled back and the failed ones are not');
is($node->safe_psql('cell1', 'SELECT breaker_state FROM claims_cell.stats'), 'closed',
	'the breaker is closed');
is($node->psql('cell1', q{INSERT INTO users VALUES (5, 'after')}), 0, 'claims work again');

# --- The store's warnings reach the cell's log as LOG lines naming the
# store, not as bare lines libpq prints to the server's stderr.
$store->safe_psql('postgres', q{
CREATE FUNCTION say_hello() RETURNS trigger LANGUAGE plpgsql
  AS $$BEGIN RAISE WARNING 'the store says hello'; RETURN NULL; END$$;
CREATE TRIGGER say_hello AFTER INSERT ON claim_leases
  FOR EACH STATEMENT EXECUTE FUNCTION say_hello();
});
my $offset = -s $node->logfile;
is($node->psql('cell1', q{INSERT INTO users VALUES (6, 'hello')}), 0, 'a claim while the store warns');
like(slurp_file($node->logfile, $offset),
	qr/LOG:  claims_cell: the claims store at \S+ reported WARNING: the store says hello/,
	'the store\'s warning is logged as LOG with the store\'s address');

$node->stop;
$store->stop;
done_testing();
