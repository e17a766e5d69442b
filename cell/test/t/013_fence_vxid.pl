# The fence of claims_cell.reconcile() waits for the writers' transactions
# themselves, not for what pg_stat_activity shows of them: a writer that
# the view hides (track_activities = off, as a superuser's session and as
# another role's) is frozen between its begin_update at the store and its
# local lease row (a BEFORE INSERT trigger on the lease table waits for an
# advisory lock). Reconcile passes fence its lease and roll it back; the
# fence must stay until the writer's transaction has ended, so that when
# the writer resumes its row conflicts with the fence and its COMMIT fails
# with 40001 instead of committing values whose lease was rolled back.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell');
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE ROLE other_writer LOGIN;
GRANT INSERT, SELECT ON users TO other_writer;
CREATE FUNCTION public.hold_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT NEW.fence THEN
        PERFORM pg_catalog.pg_advisory_lock_shared(4242);
        PERFORM pg_catalog.pg_advisory_unlock_shared(4242);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER hold_before BEFORE INSERT ON claims_cell.outstanding_leases
  FOR EACH ROW EXECUTE FUNCTION public.hold_lease();
});
# the other role's sessions are hidden from the view by its own setting
$node->safe_psql('postgres', q{ALTER ROLE other_writer SET track_activities = off});

sub reconcile
{
	return $node->safe_psql('cell1',
		"SET claims_cell.stale_after = 0;\nSELECT * FROM claims_cell.reconcile()");
}

sub fences
{
	return $node->safe_psql('cell1',
		'SELECT count(*) FROM claims_cell.outstanding_leases WHERE fence');
}

# One writer hidden from pg_stat_activity, frozen, fenced, resumed.
sub hidden_writer
{
	my ($what, $conninfo, $setup, $id, $value) = @_;

	my $lock = start_session($node, 'dbname=cell1', "SELECT pg_advisory_lock(4242);\n");
	$lock->{h}->pump until $lock->{out} ne '';
	my $w = start_session($node, "dbname=cell1 $conninfo", "$setup\nINSERT INTO users VALUES ($id, '$value');\n");
	ok( $node->poll_query_until('cell1',
			q{SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted}),
		"$what: the writer has its lease at the store and waits before its row");
	is( $node->safe_psql('cell1', q{
SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l USING (pid)
 WHERE l.locktype = 'advisory' AND NOT l.granted AND a.xact_start IS NOT NULL}),
		'0', "$what: pg_stat_activity shows no transaction start of the writer");

	is(reconcile(), '0|0|0|1', "$what: the first pass fences the writer's lease");
	my $vxid = $node->safe_psql('cell1',
		q{SELECT virtualtransaction FROM pg_locks WHERE locktype = 'advisory' AND NOT granted});
	is( $node->safe_psql('cell1', qq{
SELECT '$vxid' = ANY (fence_waits_for) FROM claims_cell.outstanding_leases WHERE fence}),
		't', "$what: the fence records the writer's virtual transaction id ($vxid)");
	is(reconcile(), '0|1|0|0', "$what: the next pass rolls the lease back at the store");
	is(fences(), '1', "$what: the fence stays while the writer's transaction runs");
	is(reconcile(), '0|0|0|0', "$what: a later pass has nothing to do");
	is(fences(), '1', "$what: and the fence still stays");

	$lock->{in} .= "SELECT pg_advisory_unlock(4242);\n\\q\n";
	$lock->{h}->finish;
	$w->{h}->finish;
	like($w->{err}, qr/ERROR:\s+40001: lease \S+ was settled by reconciliation; retry the transaction/,
		"$what: the resumed writer's COMMIT fails with 40001");
	is($node->safe_psql('cell1', "SELECT count(*) FROM users WHERE username = '$value'"),
		'0', "$what: nothing of the writer is kept locally");
	is( $store->safe_psql('postgres', "SELECT count(*) FROM claims WHERE bucket_value = '$value'"),
		'0', "$what: nothing is claimed at the store");

	is(reconcile(), '0|0|0|0', "$what: the pass after the writer ended");
	is(fences(), '0', "$what: deletes the fence");
	return;
}

hidden_writer('superuser, track_activities off', '', 'SET track_activities = off;', 1, 'alice');
hidden_writer('another role, track_activities off', 'user=other_writer', '', 2, 'bob');

# A fence of an older version (no transactions recorded) records the ones
# running at the next pass, and goes once they ended.
$node->safe_psql('cell1', q{DROP TRIGGER hold_before ON claims_cell.outstanding_leases});
my $idle = start_session($node, 'dbname=cell1', "BEGIN;\nSELECT pg_backend_pid();\n");
$idle->{h}->pump until $idle->{out} =~ /^(\d+)$/m;
my $idle_pid = $1;
$node->safe_psql('cell1', q{INSERT INTO claims_cell.outstanding_leases (uuid, fence, created_at, updated_at)
  VALUES ('00000000-0000-7000-8000-000000000001', true, now() - interval '10 milliseconds', now())});
is(reconcile(), '0|0|0|0', 'an old settled fence without transactions');
is( $node->safe_psql('cell1', qq{
SELECT (SELECT virtualtransaction FROM pg_locks WHERE locktype = 'virtualxid' AND pid = $idle_pid)
       = ANY (fence_waits_for)
  FROM claims_cell.outstanding_leases WHERE fence}),
	't', 'records the transactions running now');
is(reconcile(), '0|0|0|0', 'a pass while one of them runs');
is(fences(), '1', 'keeps the fence');
$idle->{in} .= "COMMIT;\n\\q\n";
$idle->{h}->finish;
is(reconcile(), '0|0|0|0', 'a pass after they ended');
is(fences(), '0', 'deletes it');

$node->stop;
$store->stop;
done_testing();
