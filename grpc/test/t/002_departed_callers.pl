# claims-grpc: callers whose deadline is shorter than a BeginUpdate leave no
# lease behind. A burst of concurrent BeginUpdates with deadlines from 1 ms
# to 600 ms, and a few of 30 s that get their lease however loaded the
# machine (a 600 ms caller starts a process and a TLS handshake): afterwards the store's outstanding leases are exactly those the
# server delivered (its call log says OK, the caller not gone), and they
# include every lease a caller received. A reply the server delivered in time
# can still lose to the caller's own timer on a loaded machine (the caller
# reports DEADLINE_EXCEEDED); no server can tell, and such a lease is left to
# the stale-lease reconciliation of the protocol. The test reports how many.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsGrpc;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('store');
$node->init;
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION claims;
	CREATE ROLE cell_one LOGIN;
	SELECT claims_register_cell(1, 'one', 'cell_one');
});
ClaimsGrpc::setup_gateway_role($node, 'claims_gateway', ['cell_one']);
my $certs = ClaimsGrpc::make_certs("$PostgreSQL::Test::Utils::tmp_check/grpc_certs",
	clients => ['cell-one']);
my $gw = ClaimsGrpc->start(node => $node, certs => $certs, login => 'claims_gateway',
	identity => { 'cell-one' => 'cell_one' }, args => ['--pool-size', '4']);

my $n = 40;
my (@h, @out, @err);
my $log_from = length($gw->log);    # the log file may hold earlier servers' lines
for my $i (0 .. $n - 1) {
	my $json = sprintf('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", '
	  . '"value": "u%d"}, "subject": {"type": "USER", "id": %d}, "source": {"type": '
	  . '"RAILS_TABLE_USERS", "rails_primary_key_id": "AAAAAAAAAAE="}}]}', $i, $i + 1);
	my $d = $certs->{dir};
	my @cmd = (ClaimsGrpc::call_bin(), '--target', '127.0.0.1:' . $gw->port, '--ca', "$d/ca.crt",
		'--server-name', 'localhost', '--cert', "$d/cell-one.crt", '--key', "$d/cell-one.key",
		'--timeout-ms', ($i < $n - 4 ? 1 + 15 * $i : 30_000), 'BeginUpdate', $json);
	($out[$i], $err[$i]) = ('', '');
	push @h, IPC::Run::start(\@cmd, '>', \$out[$i], '2>', \$err[$i]);
}
$_->finish for @h;
my %codes;
my $ok = 0;
my @received;
for my $i (0 .. $n - 1) {
	my ($code) = $err[$i] =~ /^([A-Z_]+): /m;
	$codes{ $code // 'none' }++;
	next unless ($code // '') eq 'OK';
	$ok++;
	push @received, $out[$i] =~ /"value"\s*:\s*"([0-9a-f-]{36})"/;
}
diag("first reply: $err[0]") unless $codes{OK} || $codes{DEADLINE_EXCEEDED};
note('replies: ' . join(', ', map { "$_=$codes{$_}" } sort keys %codes));
ok(($codes{DEADLINE_EXCEEDED} // 0) > 0, 'some callers ran out of time');
ok($ok > 0, 'some callers got their lease');
ok(!grep({ !/^(OK|DEADLINE_EXCEEDED|CANCELLED)$/ } keys %codes),
	'every reply is OK, DEADLINE_EXCEEDED or CANCELLED');

is(scalar @received, $ok, 'every OK reply carries its lease');

# What the server delivered: BeginUpdates logged OK whose caller was not gone
# (logged when the call is done). Rollbacks of undeliverable replies run
# after the call: poll.
my ($left, $delivered);
my $give_up = Time::HiRes::time() + $PostgreSQL::Test::Utils::timeout_default;
while (Time::HiRes::time() < $give_up) {
	$delivered = () = substr($gw->log, $log_from) =~ /call method=BeginUpdate .*status=OK(?! .*caller_gone)/g;
	$left = $node->safe_psql('postgres', 'SELECT count(*) FROM claims_outstanding_leases');
	last if $left == $delivered && $delivered >= $ok;
	usleep(200_000);
}
cmp_ok($delivered, '>=', $ok, "the server delivered $delivered replies, $ok of them received");
note('replies delivered in time but beaten by the caller\'s own timer: ' . ($delivered - $ok));
is($left, $delivered, "outstanding leases are exactly the $delivered delivered ones")
  or diag(join("\n", grep { /BeginUpdate|lease / } split /\n/, substr($gw->log, $log_from)));
is($node->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status = 'LEASE_CREATING'}),
	$delivered, 'no claim stays leased for a departed caller');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM claims_outstanding_leases WHERE lease_uuid = ANY (\'{'
		  . join(',', @received) . '}\'::uuid[])'),
	$ok, 'every lease a caller received is outstanding');
is($gw->stop, 0, 'SIGTERM stops the server cleanly');
note('rollbacks of departed callers logged: ' . (() = substr($gw->log, $log_from) =~ /rolled back: /g));
done_testing();
