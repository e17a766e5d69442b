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
use File::Path ();
use IO::Socket::INET ();
use IPC::Run ();
use Time::HiRes ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;

our @EXPORT = qw(store_node cell_node add_cell sql_state start_session start_inject_proxy
  wait_for_retry_sql freeze_node thaw_node private_installation make_install install_store);

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

# A started cell node: claims_cell preloaded, with extra postgresql.conf
# lines; options for PostgreSQL::Test::Cluster->new may follow (install_path).
sub cell_node
{
	my ($name, $conf, %opts) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name, %opts);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'claims_cell'\n" . ($conf // ''));
	$node->start;
	return $node;
}

# Create database db on the cell node as cell id of the store, logging in
# as role; create_options are appended to CREATE DATABASE, version (if
# given) is the extension's version to create, sql runs after configure
# (tables, claim_column).
sub add_cell
{
	my (%p) = @_;
	my ($node, $store, $db) = @p{qw(node store db)};
	$node->safe_psql('postgres', "CREATE DATABASE $db " . ($p{create_options} // ''));
	$node->safe_psql($db, sprintf(q{
CREATE EXTENSION claims_cell%s;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user '%s', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => %d);
%s
}, defined $p{version} ? " VERSION '$p{version}'" : '', $store->host, $store->port, $p{role},
		$p{cell_id}, $p{sql} // ''));
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

# A private copy of the PostgreSQL installation PG_CONFIG names (its
# bindir, pkglibdir and sharedir), for builds a test installs without
# touching the installation others use: private_installation(name) makes
# it under tmp_check/name. Returns a hash: base (tmp_check/name, for the
# test's scratch files), destdir (make install DESTDIR=destdir installs into
# the copy), install_path (the copy's directory holding bin/, for
# PostgreSQL::Test::Cluster->new), pg_config and dirs (the installation's
# pg_config and its bindir, pkglibdir and sharedir).
sub private_installation
{
	my ($name) = @_;
	my $pg_config = $ENV{PG_CONFIG} // 'pg_config';
	my %dirs;
	for my $d (qw(bindir pkglibdir sharedir))
	{
		chomp($dirs{$d} = `$pg_config --$d`);
		die "$pg_config --$d failed" if $? != 0;
	}
	my $base = "${PostgreSQL::Test::Utils::tmp_check}/$name";
	my $destdir = "$base/inst";
	File::Path::rmtree($base);
	for my $d (values %dirs)
	{
		File::Path::make_path(File::Basename::dirname("$destdir$d"));
		system('cp', '-a', $d, "$destdir$d") == 0 or die "copying $d failed";
	}
	return {
		base => $base,
		destdir => $destdir,
		install_path => File::Basename::dirname("$destdir$dirs{bindir}"),
		pg_config => $pg_config,
		dirs => \%dirs,
	};
}

# make and make install of the PGXS tree dir into the private installation
# inst, with more make arguments (e.g. "COPT=..."); what names the build in
# the error, whose log (dir/build.log) it quotes.
sub make_install
{
	my ($inst, $dir, $what, @args) = @_;
	my $args = join(' ', "PG_CONFIG='$inst->{pg_config}'", map { "'$_'" } @args);
	my $log = "$dir/build.log";
	system("make -s -C '$dir' $args >'$log' 2>&1 && "
		  . "make -s -C '$dir' $args DESTDIR='$inst->{destdir}' install >>'$log' 2>&1") == 0
	  or die "building $what failed: " . PostgreSQL::Test::Utils::slurp_file($log);
	return;
}

# Build the store from the source tree src (its src/, common/, Makefile,
# claims.control and scripts/build_sql.sh, copied to inst's base/src) with
# COPT copt and install it into the private installation inst.
sub install_store
{
	my ($inst, $src, $copt) = @_;
	my $tree = "$inst->{base}/src";
	File::Path::rmtree($tree);
	File::Path::make_path($tree, "$tree/cell", "$tree/scripts");
	system('cp', '-a', "$src/src", "$src/common", "$src/Makefile", "$src/claims.control", $tree) == 0
	  or die "copying the store's source failed";
	system('cp', '-a', "$src/scripts/build_sql.sh", "$tree/scripts/") == 0 or die;
	# objects of a build of the source tree are not this build's
	system('find', $tree, '(', '-name', '*.o', '-o', '-name', '*.so', '-o', '-name', '*.bc', ')', '-delete') == 0
	  or die;
	File::Path::rmtree("$tree/build");
	# the store alone: the top Makefile also makes cell/
	open(my $fh, '>', "$tree/cell/Makefile") or die;
	print $fh "all:\ninstall:\nclean:\n";
	close $fh;
	make_install($inst, $tree, 'the store' . ($copt ? " with COPT=$copt" : ''), "COPT=$copt");
	return;
}

1;
