# claims.json_output = proto3: every response is exactly the proto3 JSON of
# its claims.v1 message, judged by protobuf itself (Debian's
# python3-protobuf, test/proto/proto3_check.py) against the wire contract
# (test/proto/claims_v1.pb, the descriptors GitLab's client is compiled
# from): the parser takes it with unknown fields refused, and the printer,
# with its default options, writes the same JSON value back. The compat
# output of the same calls is refused or rewritten by protobuf, which shows
# that the judge can tell.
use strict;
use warnings;

use FindBin;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $python = '/usr/bin/python3';
my $check = "$FindBin::RealBin/../proto/proto3_check.py";
my $descriptors = "$FindBin::RealBin/../proto/claims_v1.pb";
my $v1 = 'gitlab.cells.topology_service.claims.v1';

# protobuf's verdict on one document: "exact", "differs: ..." or "refused: ...".
sub judge
{
	my ($type, $json) = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $python, $check, $descriptors, $type ], '<', \$json, '>', \$out, '2>', \$err)
	  or return "checker failed: $err";
	chomp $out;
	return $out;
}

my $node = PostgreSQL::Test::Cluster->new('proto3_json');
$node->init;
$node->start;

$node->safe_psql('postgres', <<'EOS');
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
CREATE ROLE cell_two LOGIN;
SELECT claims_register_cell(1, 'cell one', 'cell_one');
SELECT claims_register_cell(2, 'cell two', 'cell_two');
SELECT claims_set_cell_info(1, 'cell-1.example.com:443', 'cell-1', '{"[0,999]","[5000,5999]"}');
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (19, 'WIKI_SLUGS', 'wiki_slug');
EOS

# Run SQL under the given claims.json_output; returns the last result.
sub api
{
	my ($mode, $sql) = @_;
	return $node->safe_psql('postgres', "SET claims.json_output = $mode;\n$sql");
}

sub record_json
{
	my ($claim, $subject, $source_id, $extra) = @_;
	return sprintf('{"claim": %s, "subject": {"type": "USER", "id": %d}, '
		  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": %d}%s}',
		$claim, $subject, $source_id, $extra);
}

# Data in every state: committed claims (one with user_data, an integer
# one, one of an operator's type), an outstanding lease, a claim of cell 2.
my $begin = api('proto3', "SELECT claims_begin_update('{\"cell_id\": 1, \"create_records\": ["
	  . record_json('{"username": "alice"}', 42, 1,
		', "user_data": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": "hello"}')
	  . ', ' . record_json('{"user_id": 42}', 42, 1, '')
	  . ', ' . record_json('{"wiki_slug": "home"}', 42, 2, '')
	  . "]}')");
is(judge("$v1.BeginUpdateResponse", $begin), 'exact', 'BeginUpdateResponse is exact proto3 JSON');
my ($lease) = $begin =~ /"value": "([0-9a-f-]{36})"/;
ok(defined $lease, 'the lease uuid is in leaseUuid.value');

my $get_leased = api('proto3', q{SELECT claims_get_record('{"claim": {"username": "alice"}}')});
like($get_leased, qr/"leaseUuid": \{"value": "\Q$lease\E"\}/, 'a leased record names its lease as a UUID message');
is(judge("$v1.GetRecordResponse", $get_leased), 'exact',
	'GetRecordResponse of a leased record with user_data and cellInfo is exact');

my $list_leases = api('proto3', q{SELECT claims_list_leases('{"cell_id": 1}')});
is(judge("$v1.ListLeasesResponse", $list_leases), 'exact', 'ListLeasesResponse is exact');

my $commit = api('proto3', qq{SELECT claims_commit('{"cell_id": 1, "lease_uuid": {"value": "$lease"}}'::jsonb)});
is(judge("$v1.CommitUpdateResponse", $commit), 'exact', 'CommitUpdateResponse ({}) is exact');

for my $q (['{"claim": {"username": "alice"}}', 'a committed record with user_data'],
	['{"claim": {"user_id": 42}}', 'an integer claim'],
	['{"bucket": {"type": "WIKI_SLUGS", "value": "home"}}', 'an operator\'s type (by number, no claim)'])
{
	is(judge("$v1.GetRecordResponse", api('proto3', "SELECT claims_get_record('$q->[0]')")),
		'exact', "GetRecordResponse of $q->[1] is exact");
}

# Two outstanding leases and a page of one: the next token is an Any.
my @leases;
for my $v (qw(bob carol))
{
	push @leases, api('compat', "SELECT claims_begin_update('{\"cell_id\": 1, \"create_records\": ["
		  . record_json(qq{{"username": "$v"}}, 7, 3, '') . "]}') ->> 'lease_uuid'");
}
my $page = api('proto3', q{SELECT claims_list_leases('{"cell_id": 1, "limit": 1}')});
like($page, qr/"next": \{"\@type"/, 'a page of one lease has a next token');
is(judge("$v1.ListLeasesResponse", $page), 'exact', 'ListLeasesResponse with a next token is exact');
my $rollback = api('proto3', qq{SELECT claims_rollback('{"cellId": 1, "leaseUuid": "$leases[0]"}'::jsonb)});
is(judge("$v1.RollbackUpdateResponse", $rollback), 'exact', 'RollbackUpdateResponse ({}) is exact');

my $records = api('proto3',
	q{SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS", "limit": 1}')});
like($records, qr/"truncated": true/, 'a truncated page says so');
is(judge("$v1.ListRecordsResponse", $records), 'exact', 'ListRecordsResponse (truncated) is exact');
my $all = api('proto3',
	q{SELECT claims_list_records('{"cell_id": 1, "source_type": "RAILS_TABLE_USERS", "claim_types": ["CLAIM_TYPE_USERNAME", "CLAIM_TYPE_USER_ID"]}')});
is(judge("$v1.ListRecordsResponse", $all), 'exact', 'ListRecordsResponse (last page) is exact');

# Empty answers: proto3 leaves out empty lists and false.
my $no_records = api('proto3', q{SELECT claims_list_records('{"cell_id": 2, "source_type": "RAILS_TABLE_USERS"}')});
is($no_records, '{}', 'an empty ListRecordsResponse is {}');
is(judge("$v1.ListRecordsResponse", $no_records), 'exact', 'the empty ListRecordsResponse is exact');
my $no_leases = api('proto3', q{SELECT claims_list_leases('{"cell_id": 2}')});
is(judge("$v1.ListLeasesResponse", $no_leases), 'exact', 'the empty ListLeasesResponse is exact');

# Cells: one with CellInfo (a range from 0), one without.
api('compat', "SELECT claims_commit(1, '$leases[1]')");
$node->safe_psql('postgres', "SET ROLE cell_two; SELECT claims_begin_update('{\"cell_id\": 2, \"create_records\": ["
	  . record_json('{"username": "dave"}', 8, 4, '') . "]}')");
my $cells = api('proto3', q{SELECT claims_get_cells()});
is(judge('gitlab.cells.topology_service.GetCellsResponse', $cells), 'exact', 'GetCellsResponse is exact');
like($cells, qr/"sequenceRanges": \[\{"maxval": "999"\}/, 'a range from 0 has no minval, as proto3 writes it');
is(judge("$v1.GetRecordResponse", api('proto3', q{SELECT claims_get_record('{"claim": {"username": "dave"}}')})),
	'exact', 'GetRecordResponse of a cell without CellInfo is exact');

# The judge tells: compat output is refused (UUIDs as strings) or
# rewritten (default values written, snake_case names).
like(judge("$v1.GetRecordResponse", api('compat', q{SELECT claims_get_record('{"claim": {"username": "alice"}}')})),
	qr/^refused: /, 'compat: a Record with its uuid as a string is refused by the parser');
like(judge("$v1.ListRecordsResponse", api('compat', q{SELECT claims_list_records('{"cell_id": 2, "source_type": "RAILS_TABLE_EMAILS"}')})),
	qr/^differs: /, 'compat: an empty list and false, written out, differ from the printer\'s output');
like(judge('gitlab.cells.topology_service.GetCellsResponse', api('compat', q{SELECT claims_get_cells()})),
	qr/^differs: /, 'compat: snake_case names differ from the printer\'s output');

$node->stop;
done_testing();
