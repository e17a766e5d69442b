# The stale lease reporter does not hold on to claims.database: while it
# runs, the database can be copied with CREATE DATABASE ... TEMPLATE and
# dropped with a plain DROP DATABASE. When the database is missing (at
# start or after the drop) the reporter says so once and waits, without
# FATAL lines or restarts; when the database is back it says so and reports
# stale leases there again.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault qw(crash_lines_in_log);
use Time::HiRes qw(usleep);

my $worker = 'claims stale lease reporter';
my $db = 'claims_store';

my $node = PostgreSQL::Test::Cluster->new('worker_database');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'claims'
claims.database = '$db'
claims.stale_lease_threshold = '2s'
claims.report_interval = '1s'
claims.report_repeat = '1h'
});
$node->start;

my $missing = qr/LOG:  claims: database "\Q$db\E" does not exist; stale lease reports wait until it is created/;
my $back = qr/LOG:  claims: database "\Q$db\E" is available again; stale lease reports resume/;

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

# Wait up to a minute for a pattern in the log after an offset; returns the
# offset just past it, or undef when it did not appear.
sub wait_in_log
{
	my ($re, $offset) = @_;
	for (my $i = 0; $i < 600; $i++)
	{
		my $log = log_since($offset);
		return $offset + $+[0] if $log =~ $re;
		usleep(100_000);
	}
	return undef;
}

# FATAL lines in the log after an offset.
sub fatal_lines
{
	my ($offset) = @_;
	return grep { /FATAL:/ } split /\n/, log_since($offset);
}

sub worker_pid
{
	return $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = '$worker'");
}

# Create the extension in the reporter's database and register a cell.
sub create_extension
{
	my ($cell) = @_;
	$node->safe_psql(
		$db, qq{
SET client_min_messages = warning;
CREATE EXTENSION claims;
DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_cells')
 THEN CREATE ROLE tap_cells NOLOGIN; END IF; END \$\$;
SELECT claims_register_cell($cell, 'cell-$cell', 'tap_cells');
});
	return;
}

# Lease one username for a cell in the reporter's database; returns the
# lease uuid.
sub begin_lease
{
	my ($cell, $value) = @_;
	my $request = sprintf(
		'{"cell_id": %d, "create_records": [{"bucket": {"type": "USERNAMES", "value": "%s"}, '
		  . '"subject": {"type": "USER", "id": 1}, '
		  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}',
		$cell, $value);
	return $node->safe_psql($db,
		"SELECT claims_begin_update('$request')->>'lease_uuid'");
}

# Lines saying that the server crashed and reinitialized after an offset.
sub restart_lines
{
	my ($offset) = @_;
	return (crash_lines_in_log($node, $offset),
		grep { /terminating any other active server processes|all server processes terminated; reinitializing/ }
		  split /\n/, log_since($offset));
}

# 1. Started before its database exists: one LOG line, no FATAL, no restart.
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$worker'"),
	'worker appears in pg_stat_activity');
my $pid = worker_pid();
ok(defined wait_in_log($missing, 0), 'the missing database is logged');
sleep 4;
is(count_since($missing, 0), 1, 'the missing database is logged once');
is(join("\n", fatal_lines(0)), '', 'no FATAL while the database is missing');
is(worker_pid(), $pid, 'the worker waits without restarting');

# 2. The database is created: the worker says so and reports there.
my $offset = -s $node->logfile;
$node->safe_psql('postgres', "CREATE DATABASE $db");
ok(defined wait_in_log($back, $offset), 'the database coming back is logged');
create_extension(3);
my $lease = begin_lease(3, 'alice');
ok( defined wait_in_log(
		qr/WARNING:  claims: cell 3 has 1 stale lease; the oldest, \Q$lease\E, is \d\d:\d\d:\d\d old/,
		$offset),
	'a stale lease in the database is reported');

# 3. With the worker running against the database, it can be copied and
# dropped without FORCE.
my ($rc, $stdout, $stderr) =
  $node->psql('postgres', "CREATE DATABASE claims_copy TEMPLATE $db");
is($rc, 0, 'CREATE DATABASE ... TEMPLATE of the reporter\'s database succeeds')
  or diag($stderr);
($rc, $stdout, $stderr) = $node->psql('claims_copy',
	"SELECT count(*) FROM pg_extension WHERE extname = 'claims'");
is($stdout, '1', 'the copy has the extension');

$offset = -s $node->logfile;
($rc, $stdout, $stderr) = $node->psql('postgres', "DROP DATABASE $db");
is($rc, 0, 'plain DROP DATABASE of the reporter\'s database succeeds')
  or diag($stderr);

# 4. The worker says once that the database is missing and backs off.
ok(defined wait_in_log($missing, $offset), 'the dropped database is logged as missing');
sleep 5;
is(count_since($missing, $offset), 1, 'the missing database is logged once after the drop');
# A cycle worker started just before the drop took its lock may fail to
# connect, once; nothing else may end with FATAL.
my @fatal = fatal_lines($offset);
my $race =
  qr/FATAL:  (?:database (?:"\Q$db\E"|\d+) does not exist|cannot connect to invalid database "\Q$db\E")/;
ok( @fatal <= 1 && !grep({ !/$race/ } @fatal),
	'no FATAL lines while the database is missing')
  or diag(join("\n", @fatal));
is(join("\n", restart_lines($offset)), '', 'no crash and no restart of the server');
is(worker_pid(), $pid, 'the same worker waits');

# 5. The database and the extension come back: reports resume there.
$offset = -s $node->logfile;
$node->safe_psql('postgres', "CREATE DATABASE $db");
ok(defined wait_in_log($back, $offset), 'the database coming back is logged again');
create_extension(4);
$lease = begin_lease(4, 'bob');
ok( defined wait_in_log(
		qr/WARNING:  claims: cell 4 has 1 stale lease; the oldest, \Q$lease\E/, $offset),
	'stale leases in the new database are reported');
is(worker_pid(), $pid, 'the worker that waited reports them');

unlike(log_since(0), qr/ERROR:/, 'no ERROR in the server log');

$node->stop;
done_testing();
