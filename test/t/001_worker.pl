# The stale lease reporter: visible in pg_stat_activity, reports a stale
# lease in the log and by NOTIFY, does not repeat itself, says when the cell
# is clear, follows a reload, comes back after pg_terminate_backend and
# survives DROP and CREATE EXTENSION while it runs.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault qw(register_cells);
use Time::HiRes qw(usleep);

my $worker = 'claims stale lease reporter';

my $node = PostgreSQL::Test::Cluster->new('worker');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'claims'
claims.stale_lease_threshold = '2s'
claims.report_interval = '1s'
claims.report_repeat = '1h'
});
$node->start;

# Lease one username for a cell; returns the lease uuid.
sub begin_lease
{
	my ($cell, $value) = @_;
	my $request = sprintf(
		'{"cell_id": %d, "create_records": [{"bucket": {"type": "USERNAMES", "value": "%s"}, '
		  . '"subject": {"type": "USER", "id": 1}, '
		  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}',
		$cell, $value);
	return $node->safe_psql('postgres',
		"SELECT claims_begin_update('$request')->>'lease_uuid'");
}

# The server log from a byte offset.
sub log_since
{
	my ($offset) = @_;
	return slurp_file($node->logfile, $offset);
}

# How many times a pattern occurs in the log after an offset.
sub count_since
{
	my ($re, $offset) = @_;
	my $n = () = log_since($offset) =~ /$re/g;
	return $n;
}

# Change a reloadable setting and reload the server.
sub set_and_reload
{
	my ($name, $value) = @_;
	my $from = -s $node->logfile;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $name = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# pg_reload_conf() only signals: wait until the postmaster has reloaded
	# (it signals the worker next), so that a sleep after this counts from
	# there and not from a reload still pending on a loaded machine
	$node->wait_for_log(qr/parameter "\Q$name\E" changed to "\Q$value\E"/, $from);
	return;
}

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = '$worker'");
}

# 1. The worker runs and waits quietly for CREATE EXTENSION.
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$worker'"),
	'worker appears in pg_stat_activity');
my $missing = qr/claims: extension "claims" is not installed in database "postgres"/;
$node->wait_for_log($missing);
sleep 3;
is(count_since($missing, 0), 1, 'waiting for the extension is logged once');

$node->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($node, 7, 8, 9);
my $first_pid = worker_pid();

# 2. A stale lease is logged and notified.
my $listener = $node->background_psql('postgres');
$listener->query_safe('LISTEN claims_stale_leases');

my $offset = -s $node->logfile;
my $lease7 = begin_lease(7, 'alice');
my $warn7 = qr/WARNING:  claims: cell 7 has \d+ stale leases?/;
$offset = $node->wait_for_log(
	qr/WARNING:  claims: cell 7 has 1 stale lease; the oldest, \Q$lease7\E, is \d\d:\d\d:\d\d old/,
	$offset);
pass('stale lease reported in the log');

my $notified = '';
for (my $i = 0; $i < 100; $i++)
{
	$notified .= $listener->query_safe('SELECT 1');
	last if $notified =~ /Asynchronous notification "claims_stale_leases"/;
	usleep(100_000);
}
like(
	$notified,
	qr/Asynchronous notification "claims_stale_leases" with payload "\{"cell_id" : 7, "count" : 1, "oldest_lease_uuid" : "\Q$lease7\E", "oldest_created_at" : "[^"]+"\}"/,
	'NOTIFY claims_stale_leases carries cell, count, oldest lease and its creation time');

is( $node->safe_psql(
		'postgres',
		"SELECT cell_id, age >= interval '2s', payload->>'cell_id' FROM claims_stale_leases WHERE lease_uuid = '$lease7'"
	),
	'7|t|7',
	'claims_stale_leases shows the lease with its age and payload');
is( $node->safe_psql(
		'postgres',
		'SELECT worker_last_run IS NOT NULL, stale_leases, oldest_stale_age >= interval \'2s\' FROM claims_stats'),
	't|1|t',
	'claims_stats shows the reporter\'s findings');

# 3. An unchanged report is not repeated, but reminded after report_repeat.
sleep 3;
is(count_since($warn7, $offset), 0, 'no repeated WARNING while nothing changes');
set_and_reload('claims.report_repeat', '1s');
$offset = $node->wait_for_log($warn7, $offset);
pass('reminder after claims.report_repeat');
set_and_reload('claims.report_repeat', '1h');

# 4. After the rollback the cell is reported clear, once, and then nothing.
$node->safe_psql('postgres', "SELECT claims_rollback(7, '$lease7')");
my $gone7 = qr/LOG:  claims: cell 7 has no stale leases any more/;
my $gone_offset = $node->wait_for_log($gone7, $offset);
sleep 3;
is(count_since($warn7, $gone_offset), 0, 'no WARNING for the cell after it is clear');
is(count_since($gone7, $offset), 1, 'the clear line is logged once');

# 5. A reload changes the interval.
set_and_reload('claims.report_interval', '1h');
sleep 2;
$offset = -s $node->logfile;
begin_lease(8, 'bob');
sleep 4;
is(count_since(qr/cell 8 has/, $offset), 0, 'no report within a one-hour interval');
set_and_reload('claims.report_interval', '1s');
$node->wait_for_log(qr/WARNING:  claims: cell 8 has 1 stale lease/, $offset);
pass('report appears after the interval is reloaded to 1s');

# 6. pg_terminate_backend: the postmaster starts a new worker.
my $old_pid = worker_pid();
is($old_pid, $first_pid, 'same worker so far');
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old_pid)");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$worker' AND pid <> $old_pid"
	),
	'worker restarted after pg_terminate_backend');
my $new_pid = worker_pid();
$offset = $node->wait_for_log(qr/WARNING:  claims: cell 8 has 1 stale lease/, $offset);
pass('the new worker reports again');

# 7. DROP and CREATE EXTENSION while it runs.
$node->safe_psql('postgres', 'DROP EXTENSION claims');
$offset = $node->wait_for_log($missing, $offset);
is(worker_pid(), $new_pid, 'worker survives DROP EXTENSION');
$node->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($node, 9);
my $lease9 = begin_lease(9, 'carol');
$node->wait_for_log(
	qr/WARNING:  claims: cell 9 has 1 stale lease; the oldest, \Q$lease9\E/, $offset);
is(worker_pid(), $new_pid, 'worker picks up CREATE EXTENSION without restarting');

$listener->quit;
unlike(log_since(0), qr/ERROR:/, 'no ERROR in the server log');

$node->stop;
done_testing();
