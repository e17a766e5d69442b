# claims_cell.reconcile(): the decision table on leases left unsettled
# (store and local side simulated, then a backend killed between the store's
# begin_update and the local commit), the fence against a local transaction
# still committing (both interleavings, and a writer that aborts while the
# fence waits, with real cell transactions held by an advisory lock inside
# their PRE_COMMIT), the local rows of committed leases deleted after their
# backend exited, a backlog larger than one listing page, a store that is
# down.
use strict;
use warnings;

use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $store = PostgreSQL::Test::Cluster->new('store');
$store->init;
$store->append_conf('postgresql.conf', "shared_preload_libraries = 'claims'\n");
$store->start;
$store->safe_psql('postgres', q{
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
SELECT claims_register_cell(1, 'cell-one', 'cell_one');
});

my $node = PostgreSQL::Test::Cluster->new('cell');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'claims_cell'\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE cell1');
$node->safe_psql('cell1', sprintf(q{
CREATE EXTENSION claims_cell;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one', password_required 'false');
SELECT claims_cell.configure('topology', 1);
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
}, $store->host, $store->port));

my @psql = ('psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
	'-h', $node->host, '-p', $node->port);

# A lease taken at the store for cell 1 directly; returns its uuid.
sub store_begin
{
	my ($value, $id) = @_;
	return $store->safe_psql('postgres', qq{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": $id}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": $id}}]}') ->> 'lease_uuid'});
}

sub store_state
{
	my ($uuid) = @_;
	return $store->safe_psql('postgres', "SELECT state FROM claim_leases WHERE uuid = '$uuid'");
}

sub store_outstanding
{
	return $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'});
}

sub local_rows
{
	return $node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases');
}

# reconcile() under settings; returns "committed|rolled_back|orphans_deleted|pending".
sub reconcile
{
	my ($settings, $full) = @_;
	return $node->safe_psql('cell1', "$settings\nSELECT * FROM claims_cell.reconcile("
		  . ($full ? 'true' : '') . ')');
}

# Decision table, simulated: every combination of store and local side.
my $l1 = store_begin('l1', 1);    # outstanding, local row: commit
my $l3 = store_begin('l3', 3);    # outstanding, no local row: fence, roll back
my $l4 = store_begin('l4', 4);    # committed, local row left: delete
$store->safe_psql('postgres', "SELECT claims_commit(1, '$l4')");
my $l5 = store_begin('l5', 5);    # rolled back, local row left: orphan
$store->safe_psql('postgres', "SELECT claims_rollback(1, '$l5')");
my $l6 = '00000000-0000-7000-8000-000000000006';    # unknown at the store: orphan
$node->safe_psql('cell1', qq{INSERT INTO claims_cell.outstanding_leases (uuid)
  VALUES ('$l1'), ('$l4'), ('$l5'), ('$l6')});

is(reconcile(q{SET claims_cell.stale_after = '1h'; SET claims_cell.cleanup_after = '1h';}),
	'0|0|0|5', 'young leases and rows are all pending');
is(store_outstanding(), '2', 'nothing settled at the store');

my ($out, $err) = ('', '');
$node->psql('cell1', q{SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0;
SELECT * FROM claims_cell.reconcile()}, stdout => \$out, stderr => \$err);
is($out, '1|0|1|3', 'stale: one committed, one committed row deleted, the fenced and the young orphans pending');
is(store_state($l1), 'committed', 'the lease with a local row is committed at the store');
is(store_state($l3), 'outstanding', 'the lease without a local row is only fenced in this pass');
is( $node->safe_psql('cell1', "SELECT fence FROM claims_cell.outstanding_leases WHERE uuid = '$l3'"),
	't', 'its fence row is committed');
is($node->safe_psql('cell1', "SELECT count(*) FROM claims_cell.outstanding_leases WHERE uuid IN ('$l1', '$l4')"),
	'0', 'the rows of committed leases are gone');

($out, $err) = ('', '');
$node->psql('cell1', q{SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0;
SET claims_cell.orphan_after = 0; SELECT * FROM claims_cell.reconcile()}, stdout => \$out, stderr => \$err);
is($out, '0|1|2|0', 'next pass: the fenced lease rolled back, both orphans deleted');
like($err, qr/WARNING:.*lease \Q$l5\E, which the claims store rolled back/, 'the rolled-back orphan is reported');
like($err, qr/WARNING:.*lease \Q$l6\E, which the claims store does not know/, 'the unknown orphan is reported');
is(store_state($l3), 'rolled_back', 'the lease without a local row is rolled back');
is(store_outstanding(), '0', 'no lease outstanding at the store');
is(local_rows(), '0', 'no local row left');
is(reconcile(q{SET claims_cell.stale_after = 0;}, 1), '0|0|0|0', 'a full scan finds nothing more');

# A backend killed between the store's begin_update and the local commit:
# it holds in an AFTER INSERT trigger on the lease table and is killed with
# SIGKILL, so no callback runs (the test server does not restart after a
# crash by itself: it is started again).
$node->safe_psql('cell1', q{
CREATE FUNCTION public.hold_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT NEW.fence THEN
        PERFORM pg_catalog.pg_advisory_lock_shared(4242);
        PERFORM pg_catalog.pg_advisory_unlock_shared(4242);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hold_after AFTER INSERT ON claims_cell.outstanding_leases
  FOR EACH ROW EXECUTE FUNCTION public.hold_lease();
});

# A session holding the advisory lock that the trigger waits for.
sub hold_lock
{
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start([ @psql, '-d', 'cell1' ], '<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	$s{in} .= "SELECT pg_advisory_lock(4242);\n";
	$s{h}->pump until $s{out} ne q{};
	return \%s;
}

sub release_lock
{
	my ($s) = @_;
	$s->{in} .= "SELECT pg_advisory_unlock(4242);\n\\q\n";
	$s->{h}->finish;
}

# Start a statement in the cell under an application name.
sub start_sql
{
	my ($name, $sql) = @_;
	my %w = (in => $sql, out => '', err => '');
	$w{h} = IPC::Run::start([ @psql, '-d', "dbname=cell1 application_name=$name" ],
		'<', \$w{in}, '>', \$w{out}, '2>', \$w{err});
	$w{h}->pump while length $w{in};
	return \%w;
}

# Wait until a session waits for a lock of the given type.
sub wait_lock
{
	my ($name, $type, $what) = @_;
	ok( $node->poll_query_until('cell1', qq{
SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
 WHERE a.application_name = '$name' AND l.locktype = '$type' AND NOT l.granted}), $what);
}

my $lock = hold_lock();
my $w = start_sql('killed', "INSERT INTO users VALUES (10, 'killed');\n");
wait_lock('killed', 'advisory', 'the writer holds its lease, uncommitted');
is(store_outstanding(), '1', 'its lease is outstanding at the store');
my $pid = $node->safe_psql('cell1', q{SELECT pid FROM pg_stat_activity WHERE application_name = 'killed'});
is(kill('KILL', $pid), 1, 'the writer\'s backend is killed');
$w->{h}->finish;
$lock->{h}->finish;
my $pidfile = $node->data_dir . '/postmaster.pid';
for (1 .. 600)
{
	last unless -f $pidfile;
	Time::HiRes::usleep(100_000);
}
ok(!-f $pidfile, 'the crash stopped the cell server');
$node->_update_pid(0);    # the module's record of the postmaster: it is gone
$node->start;
is(local_rows(), '0', 'after the crash no local row');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|0|0|1', 'reconcile fences the lease');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|1|0|0', 'and rolls it back at the next pass');
is(store_outstanding(), '0', 'nothing outstanding at the store');
is( $store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'killed'}),
	'0', 'the value is free');
is(local_rows(), '0', 'no local row left');

# Fence race 1: the local transaction inserted its row first and is still
# running (here held inside its INSERT; a COMMIT waiting for its standby or
# a session idle in transaction alike). The fence does not wait for it: the
# pass leaves the lease pending at once and places no fence; the writer
# commits and its COMMIT commits the lease.
$lock = hold_lock();
$w = start_sql('writer', "INSERT INTO users VALUES (1, 'alice');\n");
wait_lock('writer', 'advisory', 'the writer holds its lease row uncommitted');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|0|0|1',
	'reconcile leaves the lease of the running writer pending, without waiting for it');
is($node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases WHERE fence'), '0',
	'and places no fence');
release_lock($lock);
$w->{h}->finish;
is($w->{err}, '', 'the writer commits');
is( $store->safe_psql('postgres', q{SELECT status FROM claims WHERE bucket_value = 'alice'}),
	'ACTIVE', 'alice is claimed and committed at the store');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'alice'}), '1',
	'and kept locally');
is(store_outstanding(), '0', 'nothing outstanding at the store');
reconcile(q{SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0;});
is(local_rows(), '0', 'the next pass deletes the committed lease\'s local row');

# Fence race 1b: the local transaction inserted its row first and aborts
# (its backend is terminated) after a pass left its lease pending: its
# abort rolls the lease back, or a later pass fences it and rolls it back.
$lock = hold_lock();
$w = start_sql('aborter', "INSERT INTO users VALUES (7, 'gus');\n");
wait_lock('aborter', 'advisory', 'the writer holds its lease row uncommitted');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|0|0|1',
	'reconcile leaves the lease of the running writer pending');
$node->safe_psql('cell1', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
  WHERE application_name = 'aborter'});
release_lock($lock);
$w->{h}->finish;
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'gus'}), '0',
	'the writer kept nothing');
for (1 .. 3)
{
	last if store_outstanding() eq '0';
	reconcile(q{SET claims_cell.stale_after = 0;});
}
is(store_outstanding(), '0', 'nothing outstanding at the store after at most three passes');
reconcile(q{SET claims_cell.stale_after = 0;});
is(local_rows(), '0', 'no local row left');
is( $store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'gus'}),
	'0', 'the value is free');

# Fence race 2: the fence goes in first. The writer's row waits for the
# reconciling transaction, which commits: the writer fails with 40001 and
# its lease is rolled back.
$node->safe_psql('cell1', q{DROP TRIGGER hold_after ON claims_cell.outstanding_leases;
CREATE TRIGGER hold_before BEFORE INSERT ON claims_cell.outstanding_leases
  FOR EACH ROW EXECUTE FUNCTION public.hold_lease();});
$lock = hold_lock();
$w = start_sql('writer2', "INSERT INTO users VALUES (2, 'bob');\n");
wait_lock('writer2', 'advisory', 'the writer has its lease at the store, no row yet');
my $r = start_sql('reconciler2',
	"BEGIN;\nSET LOCAL claims_cell.stale_after = 0;\nSELECT * FROM claims_cell.reconcile();\n");
$r->{h}->pump until $r->{out} =~ /\|/;
like($r->{out}, qr/^0\|0\|\d+\|1$/m, 'reconcile fences the lease (pending)');
release_lock($lock);
wait_lock('writer2', 'transactionid', 'the writer\'s row waits for the fence');
$r->{in} .= "COMMIT;\n\\q\n";
$r->{h}->finish;
$w->{h}->finish;
like($w->{err}, qr/ERROR:\s+40001: lease \S+ was settled by reconciliation; retry the transaction/,
	'the writer fails at COMMIT with 40001');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'bob'}), '0',
	'bob is not kept locally');
is(store_outstanding(), '0', 'the writer\'s abort rolled the lease back');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|0|1|0', 'the next pass deletes the fence');
is(local_rows(), '0', 'no local row left');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'bob'}), '0',
	'bob is free at the store');
$node->safe_psql('cell1', q{DROP TRIGGER hold_before ON claims_cell.outstanding_leases});
is(system(@psql, '-d', 'cell1', '-c', q{INSERT INTO users VALUES (2, 'bob')}), 0,
	'the retried transaction commits');

# The row of a committed lease outlives its backend until reconcile.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (3, 'carol')});
is(local_rows(), '2', 'committed leases keep their rows after their sessions exit');
is(reconcile(q{SET claims_cell.cleanup_after = '1h';}), '0|0|0|2', 'younger than cleanup_after: pending');
is(reconcile(q{SET claims_cell.cleanup_after = 0;}), '0|0|2|0', 'then deleted once the store says committed');
is(local_rows(), '0', 'no local row left');
is(store_outstanding(), '0', 'nothing outstanding at the store');

# A session whose committed lease row reconcile deletes under its open
# REPEATABLE READ transaction still commits: it leaves the row to others.
my $rr = start_sql('rr', "INSERT INTO users VALUES (4, 'dora');\n"
	  . "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM users;\n");
$rr->{h}->pump until $rr->{out} =~ /^\d+$/m;
is(local_rows(), '1', 'the session\'s committed lease keeps its row');
is(reconcile(q{SET claims_cell.cleanup_after = 0;}), '0|0|1|0', 'reconcile deletes it');
$rr->{in} .= "INSERT INTO users VALUES (5, 'emil');\nCOMMIT;\n\\q\n";
$rr->{h}->finish;
is($rr->{err}, '', 'the session\'s REPEATABLE READ transaction commits');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE id IN (4, 5)}), '2', 'with both rows');
is(reconcile(q{SET claims_cell.cleanup_after = 0;}), '0|0|1|0', 'its own lease row goes at the next pass');
is(store_outstanding(), '0', 'nothing outstanding at the store');

my ($rst, $rerr) = ('', '');
$node->psql('cell1', qq{\\set VERBOSITY verbose\nBEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT * FROM claims_cell.reconcile();},
	stderr => \$rerr);
like($rerr, qr/ERROR:\s+0A000: claims_cell.reconcile\(\) must run in a READ COMMITTED transaction/,
	'reconcile refuses a transaction snapshot');

# More leases than one page of claims_list_leases (1000).
$store->safe_psql('postgres', q{SET ROLE cell_one;
SELECT count(claims_begin_update(jsonb_build_object('cell_id', 1, 'create_records', jsonb_build_array(
  jsonb_build_object('bucket', jsonb_build_object('type', 'USERNAMES', 'value', 'page' || i),
                     'subject', jsonb_build_object('type', 'USER', 'id', i),
                     'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', i))))))
  FROM generate_series(1, 1001) i});
is(store_outstanding(), '1001', '1001 leases outstanding at the store');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|0|0|1001', 'all of them are fenced across two pages');
is(reconcile(q{SET claims_cell.stale_after = 0;}), '0|1001|0|0', 'and rolled back at the next pass');
is(store_outstanding(), '0', 'nothing outstanding at the store');
is(local_rows(), '0', 'no fence left');

# A store that cannot be reached fails the pass with 08006 and changes nothing.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (6, 'fritz')});
$store->stop;
($rst, $rerr) = ('', '');
$node->psql('cell1', qq{\\set VERBOSITY verbose\nSELECT * FROM claims_cell.reconcile();},
	stderr => \$rerr);
like($rerr, qr/ERROR:\s+08006:/, 'store down: reconcile fails with 08006');
is(local_rows(), '1', 'the local row stays');
$store->start;

$node->stop;
$store->stop;
done_testing();
