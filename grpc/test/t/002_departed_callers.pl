# claims-grpc: callers whose deadline is shorter than a BeginUpdate leave no
# lease behind. A burst of concurrent BeginUpdates with deadlines from 1 ms
# to 600 ms: afterwards the store's outstanding leases are exactly those whose
# caller received them (OK replies), nothing else.
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
for my $i (0 .. $n - 1) {
	my $json = sprintf('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", '
	  . '"value": "u%d"}, "subject": {"type": "USER", "id": %d}, "source": {"type": '
	  . '"RAILS_TABLE_USERS", "rails_primary_key_id": "AAAAAAAAAAE="}}]}', $i, $i + 1);
	my $d = $certs->{dir};
	my @cmd = (ClaimsGrpc::call_bin(), '--target', '127.0.0.1:' . $gw->port, '--ca', "$d/ca.crt",
		'--server-name', 'localhost', '--cert', "$d/cell-one.crt", '--key', "$d/cell-one.key",
		'--timeout-ms', 1 + 15 * $i, 'BeginUpdate', $json);
	($out[$i], $err[$i]) = ('', '');
	push @h, IPC::Run::start(\@cmd, '>', \$out[$i], '2>', \$err[$i]);
}
$_->finish for @h;
my %codes;
my $ok = 0;
for my $i (0 .. $n - 1) {
	my ($code) = $err[$i] =~ /^([A-Z_]+): /m;
	$codes{ $code // 'none' }++;
	$ok++ if ($code // '') eq 'OK';
}
diag("first reply: $err[0]") unless $codes{OK} || $codes{DEADLINE_EXCEEDED};
note('replies: ' . join(', ', map { "$_=$codes{$_}" } sort keys %codes));
ok(($codes{DEADLINE_EXCEEDED} // 0) > 0, 'some callers ran out of time');
ok($ok > 0, 'some callers got their lease');
ok(!grep({ !/^(OK|DEADLINE_EXCEEDED|CANCELLED)$/ } keys %codes),
	'every reply is OK, DEADLINE_EXCEEDED or CANCELLED');

# Rollbacks of undeliverable replies run after the call: poll.
my $left;
for (1 .. 150) {
	$left = $node->safe_psql('postgres', 'SELECT count(*) FROM claims_outstanding_leases');
	last if $left == $ok;
	usleep(200_000);
}
is($left, $ok, "outstanding leases are exactly the $ok delivered ones");
is($node->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status = 'LEASE_CREATING'}),
	$ok, 'no claim stays leased for a departed caller');
is($gw->stop, 0, 'SIGTERM stops the server cleanly');
note('rollbacks of departed callers logged: ' . (() = $gw->log =~ /rolled back: /g));
done_testing();
