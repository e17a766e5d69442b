# claims-grpc smoke test: a store, the server in front of it with throwaway
# certificates, one BeginUpdate/CommitUpdate through it and the basic refusals.
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
	clients => ['cell-one', 'ops', 'stranger']);
my $gw = ClaimsGrpc->start(node => $node, certs => $certs, login => 'claims_gateway',
	identity => { 'cell-one' => 'cell_one', 'ops' => 'ops' });
is($gw->health, 'SERVING', 'health answers SERVING with the primary reachable');

my $create = q{{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "alice"},
	"subject": {"type": "USER", "id": 42}, "source": {"type": "RAILS_TABLE_USERS",
	"rails_primary_key_id": "AAAAAAAAACo="}, "claim": {"username": "alice"}}]}};
my ($code, $out, $err) = $gw->call('cell-one', 'BeginUpdate', $create);
is($code, 'OK', 'BeginUpdate as cell 1 succeeds') or diag($err);
my ($lease) = $out =~ /"lease_uuid":\{"value":"([0-9a-f-]{36})"\}/;
ok(defined $lease, 'BeginUpdate answers a types.v1.UUID lease_uuid') or diag($out);
is($node->safe_psql('postgres', "SELECT status FROM claims WHERE bucket_value = 'alice'"),
	'LEASE_CREATING', 'the claim is leased in the store');

($code, $out, $err) = $gw->call('cell-one', 'CommitUpdate',
	qq{{"cell_id": 1, "lease_uuid": {"value": "$lease"}}});
is($code, 'OK', 'CommitUpdate succeeds') or diag($err);
is($node->safe_psql('postgres', "SELECT status FROM claims WHERE bucket_value = 'alice'"),
	'ACTIVE', 'the claim is active after the commit');

($code, $out, $err) = $gw->call('cell-one', 'BeginUpdate', $create);
is($code, 'ALREADY_EXISTS', 'claiming a taken value is ALREADY_EXISTS (23505)');
like($err, qr/already claimed/, 'with the store\'s message');

(my $for_two = $create) =~ s/"cell_id": 1/"cell_id": 2/;
($code) = $gw->call('cell-one', 'BeginUpdate', $for_two);
is($code, 'PERMISSION_DENIED', 'cell 1 acting for cell 2 is PERMISSION_DENIED (42501)');

($code) = $gw->call('cell-one', 'CommitUpdate',
	q{{"cell_id": 1, "lease_uuid": {"value": "not-a-uuid"}}});
is($code, 'INVALID_ARGUMENT', 'a malformed lease_uuid is INVALID_ARGUMENT');

($code) = $gw->call('cell-one', 'GetRecord', q{{"bucket": {"type": "USERNAMES", "value": "alice"}}});
is($code, 'PERMISSION_DENIED', 'GetRecord is for administrators only');

($code) = $gw->call('stranger', 'GetCells');
is($code, 'UNAUTHENTICATED', 'a CN missing from the identity map is refused');
($code) = $gw->call('foreign', 'GetCells');
is($code, 'UNAVAILABLE', 'a certificate of another CA fails the handshake');
($code) = $gw->call(undef, 'GetCells');
is($code, 'UNAVAILABLE', 'no client certificate fails the handshake');

# SIGHUP rereads the identity map.
$gw->write_identity_map({ 'cell-one' => 'cell_one', 'ops' => 'ops', 'stranger' => 'cell_one' });
$gw->reload;
# until the test timeout, not 100 tries: a loaded machine may reload late
my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $give_up) {
	($code) = $gw->call('stranger', 'GetCells');
	last if $code ne 'UNAUTHENTICATED';
	select(undef, undef, undef, 0.1);
}
is($code, 'OK', 'after SIGHUP a newly mapped CN is served');
($code, $out) = $gw->call('ops', 'GetRecord', q{{"bucket": {"type": "USERNAMES", "value": "alice"}}});
is($code, 'OK', 'an administrator may GetRecord');
like($out, qr/"status":"ACTIVE"/, 'GetRecord answers the record');

like($gw->log, qr/call method=CommitUpdate cn=cell-one role=cell_one status=OK duration_ms=[0-9.]+/,
	'one line per call with method, CN, status and duration');
is($gw->stop, 0, 'SIGTERM stops the server cleanly');

done_testing();
