# CellNodes: the store and cell nodes of the claims_cell TAP tests.
#
# A store node (claims preloaded, one login role registered per cell) and a
# cell node (claims_cell preloaded) whose databases are cells configured
# against the store through a claims_cell_store server and a PUBLIC user
# mapping. Tests load it with:
#
#   use FindBin;
#   use lib "$FindBin::RealBin/../perl";
#   use CellNodes;
package CellNodes;

use strict;
use warnings;

use Exporter 'import';
use File::Basename ();
use IO::Socket::INET ();
use IPC::Run ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(store_node cell_node add_cell sql_state start_session start_inject_proxy
  wait_for_retry_sql freeze_node thaw_node);

# A started store node with cells registered: store_node(name, [id, name, role], ...).
# Its databases are UTF8, so non-ASCII values compare byte for byte. A
# hash first (store_node(name, { install_path => dir }, ...)) passes options
# to PostgreSQL::Test::Cluster->new: a store of a private installation.
sub store_node
{
	my ($name, @cells) = @_;
	my %opts = @cells && ref $cells[0] eq 'HASH' ? %{ shift @cells } : ();
	my $store = PostgreSQL::Test::Cluster->new($name, %opts);
	$store->init(extra => [ '--encoding=UTF8', '--locale=C' ]);
	$store->append_conf('postgresql.conf', "shared_preload_libraries = 'claims'\n");
	$store->start;
	$store->safe_psql('postgres', 'CREATE EXTENSION claims');
	for my $c (@cells)
	{
		my ($id, $cell_name, $role) = @$c;
		$store->safe_psql('postgres', qq{
CREATE ROLE $role LOGIN;
SELECT claims_register_cell($id, '$cell_name', '$role');
});
	}
	return $store;
}

# A started cell node: claims_cell preloaded, with extra postgresql.conf lines.
sub cell_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'claims_cell'\n" . ($conf // ''));
	$node->start;
	return $node;
}

# Create database db on the cell node as cell id of the store, logging in
# as role; create_options are appended to CREATE DATABASE, sql runs after
# configure (tables, claim_column).
sub add_cell
{
	my (%p) = @_;
	my ($node, $store, $db) = @p{qw(node store db)};
	$node->safe_psql('postgres', "CREATE DATABASE $db " . ($p{create_options} // ''));
	$node->safe_psql($db, sprintf(q{
CREATE EXTENSION claims_cell;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user '%s', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => %d);
%s
}, $store->host, $store->port, $p{role}, $p{cell_id}, $p{sql} // ''));
	return;
}

# Run SQL in a database of a node, verbose errors; returns (SQLSTATE or
# '00000', stdout, stderr). Extra psql parameters (e.g. extra_params) pass on.
sub sql_state
{
	my ($node, $db, $sql, %params) = @_;
	my ($out, $err) = ('', '');
	$node->psql($db, "\\set VERBOSITY verbose\n$sql",
		stdout => \$out, stderr => \$err, on_error_stop => 1, %params);
	my $state = $err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : '00000';
	return ($state, $out, $err);
}

# A psql session on a database (a name or a conninfo) of a node that is sent sql and keeps
# running (IPC::Run, 180 s timeout): returns {h, in, out, err}; append to
# in and pump h to go on.
sub start_session
{
	my ($node, $db, $sql) = @_;
	my @psql = ('psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
		'-h', $node->host, '-p', $node->port, '-d', $db);
	my %s = (in => $sql, out => '', err => '');
	$s{h} = IPC::Run::start(\@psql, '<', \$s{in}, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout(180));
	$s{h}->pump while length $s{in};
	return \%s;
}

# SQL for a store session that holds a lock a cell's call waits for: it
# returns once a second statement of the login role waits for a lock (one
# that started after the first waiter), e.g. the retry of a call that timed
# out; follow it with COMMIT to let the retry through. A loop in the
# server answers within ms, however loaded the machine, where a poll of
# the cell and a round trip to the session could take longer than the
# retry's call_timeout. Gives up with an error after timeout_default. It
# raises NOTICE "waiting for a retry" as it starts: pump the session until
# its stderr shows that before the call starts.
sub wait_for_retry_sql
{
	my ($role) = @_;
	my $limit = $PostgreSQL::Test::Utils::timeout_default;
	return qq{DO \$\$
DECLARE
	first timestamptz;
	give_up timestamptz := clock_timestamp() + interval '$limit s';
BEGIN
	RAISE NOTICE 'waiting for a retry';
	LOOP
		PERFORM pg_stat_clear_snapshot();
		SELECT min(query_start) INTO first FROM pg_stat_activity
		 WHERE usename = '$role' AND wait_event_type = 'Lock';
		EXIT WHEN first IS NOT NULL;
		IF clock_timestamp() > give_up THEN RAISE EXCEPTION 'no call of $role waited'; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
	LOOP
		PERFORM pg_stat_clear_snapshot();
		EXIT WHEN EXISTS (SELECT 1 FROM pg_stat_activity WHERE usename = '$role'
		                   AND wait_event_type = 'Lock' AND query_start > first);
		IF clock_timestamp() > give_up THEN RAISE EXCEPTION 'no retry of $role waited'; END IF;
		PERFORM pg_sleep(0.01);
	END LOOP;
END
\$\$;
};
}

# Start cell/test/inject_proxy.py in front of the store's socket (it injects
# an error into a session's setup while the file flag exists) and point the
# server topology of the cell database db at it; returns the proxy's pid,
# for kill 'TERM' at the end.
sub start_inject_proxy
{
	my ($store, $node, $db, $flag) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $sock = $store->host . '/.s.PGSQL.' . $store->port;
	my $proxy = File::Basename::dirname(__FILE__) . '/../inject_proxy.py';
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0) { exec('python3', $proxy, $port, $sock, $flag) or die "exec: $!"; }
	# wait until it listens: the cell's calls must not fail (and open its breaker) before
	for (my $i = 0; !IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port); $i++)
	{
		die "inject_proxy.py does not listen on port $port" if $i >= 100;
		Time::HiRes::usleep(100_000);
	}
	$node->safe_psql($db,
		"ALTER SERVER topology OPTIONS (SET host '127.0.0.1', SET port '$port', ADD sslmode 'disable')");
	return $pid;
}

# Stop a node's postmaster, then its children (it forks no more), as a
# paused VM; returns the stopped pids. They are let go after limit_s seconds
# whatever happens to the test (default 60).
sub freeze_node
{
	my ($node, $limit_s) = @_;
	my $pm = $node->{_pid};
	kill 'STOP', $pm or die "cannot stop the postmaster $pm";
	my @kids = grep { /^\d+$/ } split /\s+/, `pgrep -P $pm`;
	kill 'STOP', @kids;
	my @frozen = ($pm, @kids);
	system("(sleep " . ($limit_s // 60) . "; kill -CONT @frozen) >/dev/null 2>&1 &");
	return @frozen;
}

# Let the processes freeze_node stopped run again.
sub thaw_node
{
	my (@frozen) = @_;
	kill 'CONT', @frozen if @frozen;
	return;
}

1;
