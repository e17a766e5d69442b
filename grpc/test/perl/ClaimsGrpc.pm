# ClaimsGrpc: start and stop claims-grpc in front of a PostgreSQL::Test::Cluster
# node for tests, with certificates made by openssl.
#
#   my $certs = ClaimsGrpc::make_certs($dir, clients => ['cell-one', 'ops']);
#     $dir/ca.crt, server.{crt,key} (CN localhost, SAN localhost, 127.0.0.1),
#     $dir/<cn>.{crt,key} per client, and foreign-ca.crt with
#     $dir/foreign.{crt,key} (CN cell-one, signed by another CA).
#   ClaimsGrpc::setup_gateway_role($node, 'claims_gateway', ['cell_one', 'ops']);
#     a NOINHERIT login role that is a member of the mapped roles only.
#   my $gw = ClaimsGrpc->start(node => $node, certs => $certs,
#       identity => { 'cell-one' => 'cell_one', ops => 'ops' },
#       login => 'claims_gateway', args => ['--pool-size', 4]);
#     waits until health says SERVING (or dies after 60 s).
#   my ($code, $out, $err) = $gw->call('cell-one', 'BeginUpdate', $json, timeout_ms => 5000);
#     $code is the gRPC status name (OK, NOT_FOUND, ...), $out the response JSON.
#   $gw->health; $gw->reload (SIGHUP); $gw->log; $gw->stop (SIGTERM, returns exit status)
#
# The binaries: $ENV{CLAIMS_GRPC} / $ENV{CLAIMS_GRPC_CALL}, else grpc/build/ of
# this tree (make builds them).
package ClaimsGrpc;

use strict;
use warnings;
use File::Basename qw(dirname);
use File::Spec;
use IPC::Run ();
use PostgreSQL::Test::Utils;
use POSIX ();
use Time::HiRes qw(usleep);

my $BUILD = File::Spec->rel2abs(dirname(__FILE__) . '/../../build');

sub server_bin { return $ENV{CLAIMS_GRPC} // "$BUILD/claims-grpc"; }
sub call_bin   { return $ENV{CLAIMS_GRPC_CALL} // "$BUILD/claims-grpc-call"; }

# Run openssl, dying on failure.
sub _ssl {
	my @cmd = ('openssl', @_);
	my ($out, $err);
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err)
	  or die "openssl @_ failed: $err";
}

# One certificate signed by a CA: _issue($dir, $name, $cn, $ca, $ext).
sub _issue {
	my ($dir, $name, $cn, $ca, $ext) = @_;
	_ssl('req', '-new', '-nodes', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-subj', "/CN=$cn", '-keyout', "$dir/$name.key", '-out', "$dir/$name.csr");
	open(my $fh, '>', "$dir/$name.ext") or die;
	print $fh $ext;
	close $fh;
	_ssl('x509', '-req', '-in', "$dir/$name.csr", '-CA', "$dir/$ca.crt", '-CAkey', "$dir/$ca.key",
		'-CAcreateserial', '-days', '2', '-extfile', "$dir/$name.ext", '-out', "$dir/$name.crt");
	chmod 0600, "$dir/$name.key";
}

sub _make_ca {
	my ($dir, $name) = @_;
	_ssl('req', '-new', '-x509', '-nodes', '-newkey', 'ec', '-pkeyopt',
		'ec_paramgen_curve:prime256v1', '-subj', "/CN=$name", '-days', '2',
		'-keyout', "$dir/$name.key", '-out', "$dir/$name.crt");
}

# Make a CA, the server's certificate, clients' and a foreign one.
sub make_certs {
	my ($dir, %opt) = @_;
	mkdir $dir;
	_make_ca($dir, 'ca');
	_make_ca($dir, 'foreign-ca');
	_issue($dir, 'server', 'localhost', 'ca',
		"subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
	for my $cn ('health', @{ $opt{clients} // [] }) {
		_issue($dir, $cn, $cn, 'ca', "extendedKeyUsage=clientAuth\n");
	}
	_issue($dir, 'foreign', 'cell-one', 'foreign-ca', "extendedKeyUsage=clientAuth\n");
	return { dir => $dir, ca => "$dir/ca.crt", cert => "$dir/server.crt",
		key => "$dir/server.key" };
}

# The gateway's login role: NOINHERIT, a member of the mapped roles only.
sub setup_gateway_role {
	my ($node, $login, $roles) = @_;
	$node->safe_psql('postgres', "CREATE ROLE $login LOGIN NOINHERIT");
	$node->safe_psql('postgres', "GRANT $_ TO $login") for @$roles;
}

sub _write {
	my ($path, $text) = @_;
	open(my $fh, '>', $path) or die "$path: $!";
	print $fh $text;
	close $fh;
}

# Start the server; dies unless it reports SERVING within 60 s.
sub start {
	my ($class, %opt) = @_;
	my $node = $opt{node};
	my $dir = $opt{certs}{dir};
	my $self = bless { certs => $opt{certs}, dir => $dir }, $class;
	$self->write_identity_map($opt{identity});
	$self->{log} = "$dir/claims-grpc.log";
	unlink "$dir/port";
	my $conninfo = $opt{conninfo}
	  // $node->connstr($opt{dbname} // 'postgres') . " user=$opt{login}";
	my @cmd = (server_bin(), '--listen', '127.0.0.1:0', '--conninfo', $conninfo,
		'--tls-cert', $opt{certs}{cert}, '--tls-key', $opt{certs}{key},
		'--client-ca', $opt{certs}{ca}, '--identity-map', "$dir/identity.map",
		'--port-file', "$dir/port", '--runtime-dir', "$dir/run",
		'--health-interval-ms', '200', @{ $opt{args} // [] });
	$self->{harness} = IPC::Run::start(\@cmd, '<', \undef, '>>', $self->{log}, '2>>', $self->{log});
	for (1 .. 600) {
		last if -s "$dir/port";
		die "claims-grpc exited:\n" . $self->log unless $self->{harness}->pumpable;
		usleep(100_000);
	}
	open(my $fh, '<', "$dir/port") or die "claims-grpc did not start:\n" . $self->log;
	chomp($self->{port} = <$fh>);
	close $fh;
	for (1 .. 300) {
		return $self if $self->health eq 'SERVING';
		usleep(200_000);
	}
	die "claims-grpc never SERVING:\n" . $self->log;
}

sub port { return $_[0]{port}; }

sub write_identity_map {
	my ($self, $identity) = @_;
	_write("$self->{dir}/identity.map",
		"# CN  role\n" . join('', map { "$_  $identity->{$_}\n" } sort keys %$identity));
}

# A call as client $cn (a name given to make_certs, or 'foreign', or undef
# for no certificate): returns (status name, stdout, stderr).
sub call {
	my ($self, $cn, $method, $json, %opt) = @_;
	my $d = $self->{dir};
	my @cmd = (call_bin(), '--target', "127.0.0.1:$self->{port}", '--ca', "$d/ca.crt",
		'--server-name', 'localhost', '--timeout-ms', $opt{timeout_ms} // 10000);
	push @cmd, '--cert', "$d/$cn.crt", '--key', "$d/$cn.key" if defined $cn;
	push @cmd, $method;
	push @cmd, $json if defined $json;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err);
	chomp $out;
	my ($code) = $err =~ /^([A-Z_]+): /m;
	return ($code // 'CLIENT_ERROR', $out, $err);
}

# The health status name (SERVING, NOT_SERVING, or the call's error).
sub health {
	my ($self) = @_;
	my ($code, $out) = $self->call('health', 'Health', undef, timeout_ms => 3000);
	return $code eq 'OK' ? $out : $code;
}

sub pid { return $_[0]{harness}{KIDS}[0]{PID}; }

sub reload { kill 'HUP', $_[0]->pid; }

sub log {
	my ($self) = @_;
	return slurp_file($self->{log});
}

# SIGTERM and wait (60 s at most); returns the exit status, or -1.
sub stop {
	my ($self) = @_;
	return $self->{status} if defined $self->{status};
	kill 'TERM', $self->pid;
	for (1 .. 600) {
		if (!$self->{harness}->pumpable) {
			$self->{harness}->finish;
			return $self->{status} = $self->{harness}->result(0);
		}
		usleep(100_000);
	}
	$self->{harness}->kill_kill;
	return -1;
}

1;
