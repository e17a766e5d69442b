# GrpcTest: what test/grpc/t/*.pl share: a store node prepared for
# claims-grpc, the certificates, the gateway process, the Python helper that
# makes the gRPC calls (test/grpc/grpc_helper.py, JSON lines over a pipe)
# and a psql session that holds a lock on purpose. Every wait is bounded.
package GrpcTest;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run;
use JSON::PP;
use MIME::Base64;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use POSIX qw(WNOHANG);
use Time::HiRes qw(time sleep);

my @gateways;

our @EXPORT = qw(repo_dir grpc_binary make_certs setup_store write_map
  start_gateway stop_gateway hup_gateway helper_start helper helper_send
  helper_recv rpc poll_until meta b64_id id_of_b64 lock_session unlock_session
  sql_list);

my $json = JSON::PP->new->canonical->allow_nonref;

# The repository: TESTDIR (set by scripts/test.sh), else the cwd.
sub repo_dir
{
	return $ENV{TESTDIR} // do { require Cwd; Cwd::getcwd() };
}

# The claims-grpc binary: CLAIMS_GRPC, else grpc/build/claims-grpc of the
# tree (make grpc builds it; grpc/claims-grpc is looked at too), else the one
# on PATH. undef when there is none.
sub grpc_binary
{
	my $repo = repo_dir();
	for my $c ($ENV{CLAIMS_GRPC}, "$repo/grpc/claims-grpc", "$repo/grpc/build/claims-grpc")
	{
		return $c if defined $c && -x $c;
	}
	for my $dir (split /:/, $ENV{PATH} // '')
	{
		return "$dir/claims-grpc" if -x "$dir/claims-grpc";
	}
	return undef;
}

# Write the test certificates (test/grpc/make_certs.sh) into a temp dir.
sub make_certs
{
	my $dir = PostgreSQL::Test::Utils::tempdir('certs');
	my $script = repo_dir() . '/test/grpc/make_certs.sh';
	system('bash', $script, $dir) == 0 or BAIL_OUT("make_certs.sh failed");
	return $dir;
}

# A store node with the extension, two cells, an administrator role and the
# gateway's NOINHERIT login role that may only SET ROLE to them.
sub setup_store
{
	my ($name) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'claims'\nmax_connections = 60\n");
	$node->start;
	$node->safe_psql('postgres', q{
		SET client_min_messages = warning;
		CREATE EXTENSION claims;
		CREATE ROLE cell_one;
		CREATE ROLE cell_two;
		CREATE ROLE ops_admin;
		GRANT claims_admin TO ops_admin;
		CREATE ROLE claims_gateway LOGIN NOINHERIT;
		GRANT cell_one, cell_two, ops_admin TO claims_gateway;
		SELECT claims_register_cell(1, 'cell-one', 'cell_one');
		SELECT claims_register_cell(2, 'cell-two', 'cell_two');
	});
	return $node;
}

# Write an identity map: write_map(FILE, [CN, role]...).
sub write_map
{
	my ($file, @lines) = @_;
	open my $fh, '>', "$file.tmp" or die "cannot write $file: $!";
	print $fh "# CN            database role\n";
	print $fh "$_->[0]    $_->[1]\n" for @lines;
	close $fh;
	rename "$file.tmp", $file or die "cannot rename $file: $!";
	return;
}

# Start claims-grpc: start_gateway(NODE, CERTDIR, MAPFILE, LOGFILE) ->
# {h => harness, port => N, tls => {cert, key, ca}}. The TLS files are
# copies, so that a test may replace them.
sub start_gateway
{
	my ($node, $certs, $map, $log) = @_;
	my $bin = grpc_binary() or BAIL_OUT('claims-grpc is not built');
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my %tls;
	for my $f (['cert', 'server.crt'], ['key', 'server.key'], ['ca', 'ca.crt'])
	{
		$tls{ $f->[0] } = "$certs/gw-$f->[1]";
		system('cp', "$certs/$f->[1]", $tls{ $f->[0] }) == 0 or die "cp failed";
	}
	chmod 0600, $tls{key};
	my $conninfo = sprintf('host=%s port=%d dbname=postgres user=claims_gateway',
		$node->host, $node->port);
	my @cmd = ($bin, '--listen', "127.0.0.1:$port", '--conninfo', $conninfo,
		'--tls-cert', $tls{cert}, '--tls-key', $tls{key},
		'--client-ca', $tls{ca}, '--identity-map', $map);
	note("starting: @cmd");
	my $pid = fork;
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		open STDIN, '<', '/dev/null';
		open STDOUT, '>>', $log;
		open STDERR, '>&', \*STDOUT;
		exec @cmd or POSIX::_exit(127);
	}
	push @gateways, $pid;
	return { pid => $pid, port => $port, tls => \%tls, log => $log };
}

# SIGTERM, then wait (bounded) for the exit; returns the exit status, or
# undef when it had to be killed.
sub stop_gateway
{
	my ($gw, $timeout) = @_;
	kill 'TERM', $gw->{pid};
	my $deadline = time + ($timeout // 30);
	while (time < $deadline)
	{
		my $r = waitpid($gw->{pid}, WNOHANG);
		if ($r == $gw->{pid})
		{
			@gateways = grep { $_ != $gw->{pid} } @gateways;
			return $? >> 8;
		}
		sleep 0.1;
	}
	kill 'KILL', $gw->{pid};
	waitpid($gw->{pid}, 0);
	@gateways = grep { $_ != $gw->{pid} } @gateways;
	return undef;
}

# SIGHUP: reload the identity map and TLS files.
sub hup_gateway
{
	my ($gw) = @_;
	kill 'HUP', $gw->{pid};
	return;
}

# A gateway left running by a test that died is killed.
END
{
	kill 'KILL', $_ for @gateways;
}

# The Python helper. One per test.
my ($hh, $hin, $hout, $herr, $htimer);

sub helper_start
{
	my ($certs, $port) = @_;
	my $repo = repo_dir();
	my $stubs = PostgreSQL::Test::Utils::tempdir('stubs');
	($hin, $hout, $herr) = ('', '', '');
	$htimer = IPC::Run::timer(120);
	$hh = IPC::Run::start(
		[ '/usr/bin/python3', "$repo/test/grpc/grpc_helper.py", "$repo/grpc",
		  $stubs, $certs, "127.0.0.1:$port" ],
		\$hin, \$hout, \$herr, $htimer);
	my $ready = helper_recv();
	BAIL_OUT("grpc_helper.py did not start: $herr") unless $ready->{ready};
	return;
}

# Send one command without waiting for its answer.
sub helper_send
{
	my ($cmd) = @_;
	$hin .= $json->encode($cmd) . "\n";
	$hh->pump_nb;
	return;
}

# Wait (at most TIMEOUT seconds, default 120) for the next answer.
sub helper_recv
{
	my ($timeout) = @_;
	$htimer->start($timeout // 120);
	while ($hout !~ /\n/)
	{
		eval { $hh->pump; 1 } or BAIL_OUT("grpc_helper.py: $@ $herr");
		BAIL_OUT("grpc_helper.py timed out: $herr") if $htimer->is_expired;
	}
	$hout =~ s/^(.*?)\n//;
	my $line = $1;
	my $out = $json->decode($line);
	BAIL_OUT("grpc_helper.py: $out->{error}") if ref $out eq 'HASH' && $out->{error};
	return $out;
}

sub helper
{
	my ($cmd, $timeout) = @_;
	helper_send($cmd);
	return helper_recv($timeout);
}

# One call: rpc(IDENT, METHOD, REQUEST, key => value...).
sub rpc
{
	my ($as, $method, $req, %o) = @_;
	return helper({ op => 'call', as => $as, method => $method, req => $req, %o });
}

# Call CODE until it returns true, at most TIMEOUT seconds; returns the
# last value.
sub poll_until
{
	my ($timeout, $code) = @_;
	my $deadline = time + $timeout;
	my $v;
	while (1)
	{
		$v = $code->();
		return $v if $v || time > $deadline;
		sleep 0.2;
	}
}

# int64 as 8 bytes big-endian, base64 (proto3 JSON bytes).
sub b64_id
{
	return encode_base64(pack('Q>', $_[0]), '');
}

# Back from base64 of 8 bytes big-endian; undef for any other length.
sub id_of_b64
{
	my $b = decode_base64($_[0] // '');
	return length($b) == 8 ? unpack('Q>', $b) : undef;
}

# A create record: a username (or BUCKET) of a user, source the users table.
sub meta
{
	my ($value, $id, $bucket) = @_;
	return {
		bucket => { type => $bucket // 'USERNAMES', value => $value },
		subject => { type => 'USER', id => $id },
		source => { type => 'RAILS_TABLE_USERS', rails_primary_key_id => b64_id($id) } };
}

# A psql session holding a transaction open: lock_session(NODE, SQL) runs
# SQL in an open transaction and returns once it has run.
sub lock_session
{
	my ($node, $sql) = @_;
	my ($in, $out, $err) = ('', '', '');
	my $timer = IPC::Run::timer(60);
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-d',
		  $node->connstr('postgres') ],
		\$in, \$out, \$err, $timer);
	$in .= "BEGIN;\n$sql;\nSELECT 'holding';\n";
	$h->pump until $out =~ /holding/ || $timer->is_expired;
	BAIL_OUT("lock session failed: $err") unless $out =~ /holding/;
	return { h => $h, in => \$in, out => \$out, timer => $timer };
}

# End the session's transaction (COMMIT) and the session.
sub unlock_session
{
	my ($s) = @_;
	${ $s->{in} } .= "COMMIT;\n\\q\n";
	$s->{timer}->start(60);
	$s->{h}->finish;
	return;
}

# A one-column query's rows as a list.
sub sql_list
{
	my ($node, $sql) = @_;
	my $r = $node->safe_psql('postgres', $sql);
	return grep { $_ ne '' } split /\n/, $r;
}

1;
