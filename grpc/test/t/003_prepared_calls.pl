# claims-grpc runs each call as prepared statements (the settings, then the
# function), parsed once per connection: the store's statement log shows
# them executed and no call sent as text. One connection serves callers of
# different roles in turn, each call with its own role; a connection the
# store ended is replaced and its statements prepared again.
use strict;
use warnings;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsGrpc;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('store');
$node->init;
$node->append_conf('postgresql.conf', "log_statement = 'all'");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION claims;
	CREATE ROLE cell_one LOGIN;
	CREATE ROLE cell_two LOGIN;
	CREATE ROLE ops;
	GRANT claims_admin TO ops;
	SELECT claims_register_cell(1, 'one', 'cell_one');
	SELECT claims_register_cell(2, 'two', 'cell_two');
});
ClaimsGrpc::setup_gateway_role($node, 'claims_gateway', ['cell_one', 'ops']);

my $certs = ClaimsGrpc::make_certs("$PostgreSQL::Test::Utils::tmp_check/grpc_certs",
	clients => ['cell-one', 'ops']);
my $gw = ClaimsGrpc->start(node => $node, certs => $certs, login => 'claims_gateway',
	identity => { 'cell-one' => 'cell_one', 'ops' => 'ops' }, args => [ '--pool-size', '1' ]);

sub begin_for {
	my ($who, $cell, $name) = @_;
	my ($code, $out, $err) = $gw->call($who, 'BeginUpdate',
		qq{{"cell_id": $cell, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$name"},
		"subject": {"type": "USER", "id": 7}, "source": {"type": "RAILS_TABLE_USERS",
		"rails_primary_key_id": "AAAAAAAAAAc="}}]}});
	my ($lease) = $out =~ /"lease_uuid":\{"value":"([0-9a-f-]{36})"\}/;
	return ($code, $lease, $err);
}

sub pair {
	my ($who, $cell, $name) = @_;
	my ($code, $lease, $err) = begin_for($who, $cell, $name);
	return "begin $code: $err" unless $code eq 'OK' && defined $lease;
	($code, undef, $err) = $gw->call($who, 'CommitUpdate',
		qq{{"cell_id": $cell, "lease_uuid": {"value": "$lease"}}});
	return $code eq 'OK' ? 'OK' : "commit $code: $err";
}

my $log_from = -s $node->logfile;
is(pair('cell-one', 1, "p$_"), 'OK', "pair $_ as cell 1") for 1 .. 3;
my $log = substr(slurp_file($node->logfile), $log_from);
my $executes = () = $log =~ /execute claims_grpc_\d+: SELECT/g;
is($executes, 12, 'the 6 calls ran as 12 executions of prepared statements (settings, call)');
unlike($log, qr/SET LOCAL ROLE|statement: SELECT true, /, 'no call was sent as text');

# Alternating roles on the one connection: each call is its own caller's.
is((begin_for('ops', 2, 'ops-for-two'))[0], 'OK', 'an administrator begins for cell 2');
is((begin_for('cell-one', 2, 'one-for-two'))[0], 'PERMISSION_DENIED',
	'then cell 1 on the same connection may not act for cell 2');
is($node->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'one-for-two'}),
	'0', 'and wrote nothing');
is(pair('ops', 1, 'ops-pair'), 'OK', 'an administrator\'s pair for cell 1');

# The store ends the gateway's connection: the gateway reconnects and
# prepares its statements again (bounded: 10 attempts).
is($node->safe_psql('postgres',
	q{SELECT count(pg_catalog.pg_terminate_backend(pid)) > 0 FROM pg_stat_activity WHERE usename = 'claims_gateway'}),
	't', 'the store ends the gateway\'s connections');
my $got = '';
for my $i (1 .. 10) {
	$got = pair('cell-one', 1, "after$i");
	last if $got eq 'OK';
}
is($got, 'OK', 'pairs succeed again on a new connection');

is($gw->stop, 0, 'SIGTERM stops the server cleanly');
done_testing();
