# In-place upgrade of the store: the first released version with cells,
# claims and leases in it, updated step by step to the control file's
# default_version with ALTER EXTENSION ... UPDATE, must be identical to a
# fresh install of that version (every member object's definition,
# privileges and config-dump registrations), keep its data row for row,
# answer the API, and survive pg_dump / pg_restore unchanged. A scratch
# database with one extra GRANT and one altered default shows that the
# comparison sees such differences.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use ExtensionUpgrade;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'claims'\n");
$node->start;

my @versions = versions_from($node, 'claims');
cmp_ok(scalar @versions, '>=', 2, "claims has update steps: @versions");
my ($first, @steps) = @versions;

$node->safe_psql('postgres', q{
CREATE ROLE cell_a LOGIN;
CREATE DATABASE upgraded;
CREATE DATABASE fresh;
});

# The first release, with data in every kind of state.
$node->safe_psql('upgraded', "CREATE EXTENSION claims VERSION '$first'");
is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'claims'}),
	$first, "installed at $first");

sub begin_update
{
	my ($db, $value, $id) = @_;
	return $node->safe_psql($db, qq{
SET ROLE cell_a;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": $id}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": $id}}]}') ->> 'lease_uuid'});
}

$node->safe_psql('upgraded', q{SELECT claims_register_cell(1, 'cell-a', 'cell_a')});
my $committed = begin_update('upgraded', 'alice', 1);
$node->safe_psql('upgraded', "SET ROLE cell_a; SELECT claims_commit(1, '$committed')");
my $outstanding = begin_update('upgraded', 'bob', 2);
my $rolled_back = begin_update('upgraded', 'carol', 3);
$node->safe_psql('upgraded', "SET ROLE cell_a; SELECT claims_rollback(1, '$rolled_back')");

# The library serves a store not yet updated: a record's cell_info then
# has the cell's id only (the registry has no CellInfo columns before 1.2).
is($node->safe_psql('upgraded', q{
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "alice"}}') -> 'cell_info'}),
	'{"id": "1"}', "at $first: get_record answers, cell_info with the id only");

my $tables = member_tables($node, 'upgraded', 'claims');
cmp_ok(scalar @$tables, '>', 3, 'the extension owns tables');
my %before = map { $_->[0] => table_rows($node, 'upgraded', @$_) } @$tables;

for my $v (@steps)
{
	$node->safe_psql('upgraded', "ALTER EXTENSION claims UPDATE TO '$v'");
	is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'claims'}),
		$v, "updated to $v");
}
$node->safe_psql('fresh', 'CREATE EXTENSION claims');

# Identical to a fresh install.
my $fresh_image = database_image($node, 'fresh');
like($fresh_image, qr/ALTER EXTENSION claims ADD FUNCTION public\.claims_begin_update/,
	'the image lists the extension\'s members one by one');
same_text(database_image($node, 'upgraded'), $fresh_image,
	'updated in place: the same objects, definitions and privileges as a fresh install');
is(extension_registration($node, 'upgraded', 'claims'), extension_registration($node, 'fresh', 'claims'),
	'the same version, schema, owner and config-dump registrations');

# The comparison sees a difference of one privilege or one default.
$node->safe_psql('postgres', 'CREATE DATABASE scratch TEMPLATE fresh');
$node->safe_psql('scratch', 'GRANT EXECUTE ON FUNCTION claims_commit(bigint, uuid) TO PUBLIC');
isnt(database_image($node, 'scratch'), $fresh_image, 'an extra GRANT is a difference');
$node->safe_psql('scratch', q{
REVOKE EXECUTE ON FUNCTION claims_commit(bigint, uuid) FROM PUBLIC;
});
same_text(database_image($node, 'scratch'), $fresh_image, 'revoked again, the scratch copy is identical');
$node->safe_psql('scratch', q{ALTER TABLE claim_cells ALTER COLUMN disabled SET DEFAULT true});
isnt(database_image($node, 'scratch'), $fresh_image, 'an altered column default is a difference');

# The data kept row for row (in the columns it had before).
for my $t (@$tables)
{
	is(table_rows($node, 'upgraded', @$t), $before{ $t->[0] }, "$t->[0]: every row kept");
}

# The API after the update.
$node->safe_psql('upgraded', "SET ROLE cell_a; SELECT claims_commit(1, '$outstanding')");
my $dave = begin_update('upgraded', 'dave', 4);
$node->safe_psql('upgraded', "SET ROLE cell_a; SELECT claims_commit(1, '$dave')");
is( $node->safe_psql('upgraded', q{
SELECT string_agg(claims_get_record(jsonb_build_object('bucket', jsonb_build_object('type', 'USERNAMES', 'value', v)))
                  #>> '{record,status}', ',' ORDER BY v)
  FROM unnest(ARRAY['alice', 'bob', 'dave']) v}),
	'ACTIVE,ACTIVE,ACTIVE', 'a lease from before the update and one after commit through the API');
$node->safe_psql('upgraded',
	q{SELECT claims_set_cell_info(1, 'cell-a.example:443', 'cell-a', '{"[1,1000]"}', 'after the update')});
is( $node->safe_psql('upgraded', q{
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "alice"}}') -> 'cell_info'}),
	'{"id": "1", "address": "cell-a.example:443", "sequence_range": {"maxval": "1000", "minval": "1"}, "session_prefix": "cell-a", "sequence_ranges": [{"maxval": "1000", "minval": "1"}]}',
	'after the update the cell info set by an administrator is in get_record');
is( $node->safe_psql('upgraded', q{
SELECT claims_get_record('{"bucket": {"type": "USERNAMES", "value": "carol"}}') IS NULL}),
	't', 'the value of the lease rolled back before the update is free');

# pg_dump / pg_restore of the updated database restores the same.
my $dump = $node->basedir . '/upgraded.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('upgraded') ], 'pg_dump of the updated database');
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored'), $dump ],
	'pg_restore into a new database');
same_text(database_image($node, 'restored'), database_image($node, 'upgraded'),
	'the restored database has the same image');
for my $t (@$tables)
{
	is(table_rows($node, 'restored', @$t), table_rows($node, 'upgraded', @$t),
		"$t->[0]: restored row for row");
}

$node->stop;
done_testing();
