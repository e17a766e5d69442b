
# A repeated call is as durable as the first: a primary in synchronous
# replication with its only standby stopped. A client's call times out while
# its commit waits for the standby and the client cancels it (the server
# then ends the wait with a WARNING: the work is committed locally only;
# statement_timeout does not reach the wait, which comes after the
# statement); the client repeats the call with the same
# lease uuid. The store finds the work done, and must not answer success
# before that work has reached the standby, for otherwise a failover to the
# standby loses a lease the client was told exists. Checked for the three
# idempotent repeats: claims_begin_update of an existing lease (same
# request), claims_commit of a committed lease and claims_rollback of a
# rolled-back one. Once the standby is back, the repeats succeed and their
# work is on the standby.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $cancelled = qr/WARNING:\s+canceling wait for synchronous replication/;

my $primary = new_claims_node('primary', allows_streaming => 1);
$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
$primary->append_conf('postgresql.conf', <<'EOC');
synchronous_standby_names = '*'
synchronous_commit = on
EOC
$primary->reload;
$primary->poll_query_until('postgres',
	q{SELECT count(*) = 1 FROM pg_stat_replication WHERE sync_state = 'sync'})
  or BAIL_OUT('the standby did not become synchronous');

my %lease = (
	begin => '16000000-0000-4000-8000-000000000001',
	commit => '16000000-0000-4000-8000-000000000002',
	rollback => '16000000-0000-4000-8000-000000000003',
);
my $begin_sql = 'SELECT claims_begin_update(' . sql_quote(enc({
	cell_id => 1, lease_uuid => $lease{begin},
	create_records => [ metadata('USERNAMES', 'sync-begin', 1, 1) ] })) . '::jsonb)';
my %call = (
	begin => $begin_sql,
	commit => "SELECT claims_commit(1, '$lease{commit}')",
	rollback => "SELECT claims_rollback(1, '$lease{rollback}')",
);

# While the standby keeps up: a committed claim, a lease that creates (to be
# committed) and one that destroys the committed claim (to be rolled back).
my $kept = $primary->safe_psql('postgres', 'SELECT claims_begin_update(' . sql_quote(enc({
	cell_id => 1, create_records => [ metadata('USERNAMES', 'sync-kept', 2, 2) ] })) . "::jsonb)->>'lease_uuid'");
$primary->safe_psql('postgres', "SELECT claims_commit(1, '$kept')");
$primary->safe_psql('postgres', 'SELECT claims_begin_update(' . sql_quote(enc({
	cell_id => 1, lease_uuid => $lease{commit},
	create_records => [ metadata('USERNAMES', 'sync-commit', 3, 3) ] })) . '::jsonb)');
$primary->safe_psql('postgres', 'SELECT claims_begin_update(' . sql_quote(enc({
	cell_id => 1, lease_uuid => $lease{rollback},
	destroy_records => [ bucket_only('USERNAMES', 'sync-kept') ] })) . '::jsonb)');

# The standby stalls: from now on every commit that wrote waits for it.
$standby->stop;

# Send $sql on a new session and wait until its backend either waits for
# the standby ('waiting') or has answered it ('answered'; until the backend
# has the statement, it shows the one before, idle). Returns the session,
# its backend's pid and which.
sub call_on_stalled
{
	my ($sql) = @_;
	my $s = ClaimsFault::Session->new($primary->connstr('postgres'), timeout => 120);
	$s->connect or BAIL_OUT('cannot connect to the primary');
	my $pid = $s->query('SELECT pg_backend_pid()')->{out};
	$s->send($sql);
	my $where = 'busy';
	my $until = time() + 60;
	while ($where eq 'busy' && time() < $until)
	{
		sleep(0.1);
		$where = $primary->safe_psql('postgres', qq{
			SELECT CASE WHEN wait_event = 'SyncRep' THEN 'waiting'
			            WHEN state = 'idle' AND query NOT LIKE '%pg_backend_pid%' THEN 'answered'
			            ELSE 'busy' END
			FROM pg_stat_activity WHERE pid = $pid});
	}
	return ($s, $pid, $where);
}

# The client gives up: it cancels the call (as a driver does on timeout).
sub cancel_call
{
	my ($s, $pid) = @_;
	$primary->safe_psql('postgres', "SELECT pg_cancel_backend($pid)");
	my $r = $s->result;
	$s->close;
	return $r;
}

for my $name (qw(begin commit rollback))
{
	my ($s, $pid, $where) = call_on_stalled($call{$name});
	is($where, 'waiting', "$name: the first call's commit waits for the stopped standby");
	my $r = cancel_call($s, $pid);
	like($r->{err} // '', $cancelled, "$name: the client cancels it: committed locally only");

	($s, $pid, $where) = call_on_stalled($call{$name});
	$r = $where eq 'waiting' ? cancel_call($s, $pid) : $s->result;
	$s->close;
	is($where, 'waiting', "$name: the repeat, finding its work done, waits for the standby too")
	  or diag("the repeat answered without waiting: sqlstate " . ($r->{sqlstate} // 'lost') . ': ' . ($r->{out} // ''));
	like($r->{err} // '', $cancelled, "$name: and the client cancels it while it waits");
}

# Repeats not cancelled wait as long as the standby is away, and answer
# once it is back; remote_apply: their answer means the standby shows it.
my %session;
for my $name (qw(begin commit rollback))
{
	my $s = ClaimsFault::Session->new($primary->connstr('postgres'), timeout => 300);
	$s->connect or BAIL_OUT("cannot connect for the $name repeat");
	$s->query("SET application_name = 'sync_repeat_$name'");
	$s->query('SET synchronous_commit = remote_apply');
	$s->send($call{$name});
	$session{$name} = $s;
}
my $waiting = '';
for (1 .. 600)
{
	$waiting = $primary->safe_psql('postgres', q{
		SELECT string_agg(application_name, ',' ORDER BY application_name) FROM pg_stat_activity
		WHERE application_name LIKE 'sync\_repeat\_%' AND wait_event = 'SyncRep'});
	last if $waiting eq 'sync_repeat_begin,sync_repeat_commit,sync_repeat_rollback';
	sleep(0.1);
}
is($waiting, 'sync_repeat_begin,sync_repeat_commit,sync_repeat_rollback',
	'every repeat waits for the stopped standby');

$standby->start;
for my $name (qw(begin commit rollback))
{
	my $r = $session{$name}->result;
	is($r->{sqlstate} // 'lost', '00000', "$name: the repeat succeeds once the standby is back")
	  or diag($r->{err});
	$session{$name}->close;
}
is($standby->safe_psql('postgres', qq{
	SELECT string_agg(uuid || '=' || state, ' ' ORDER BY uuid) FROM claim_leases
	WHERE uuid IN ('$lease{begin}', '$lease{commit}', '$lease{rollback}')}),
	"$lease{begin}=outstanding $lease{commit}=committed $lease{rollback}=rolled_back",
	'the standby holds the three leases as the repeats answered');
is($standby->safe_psql('postgres', q{
	SELECT string_agg(bucket_value || '=' || status, ' ' ORDER BY bucket_value) FROM claims
	WHERE bucket_value LIKE 'sync-%'}),
	'sync-begin=LEASE_CREATING sync-commit=ACTIVE sync-kept=ACTIVE',
	'and their claims');

# A repeat never makes a lease of its own.
is($primary->safe_psql('postgres', q{SELECT count(*) FROM claim_leases}), '4',
	'no repeat made a lease');

$primary->stop;
$standby->stop;
done_testing();
