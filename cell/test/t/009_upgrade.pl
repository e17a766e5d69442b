# In-place upgrade of claims_cell: a cell configured at the first released
# version, with a claimed table holding rows and lease rows outstanding,
# updated step by step to the control file's default_version, must be
# identical to a cell set up the same way at that version (every member
# object, privileges, config-dump registrations, and the triggers
# claim_column installed), keep its data, and go on claiming at the store.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use lib "$FindBin::RealBin/../../../test/perl";
use CellNodes;
use ExtensionUpgrade;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cell');

my @versions = versions_from($node, 'claims_cell');
cmp_ok(scalar @versions, '>=', 2, "claims_cell has update steps: @versions");
my ($first, @steps) = @versions;

# The same cell setup in both databases, at the given version.
sub set_up
{
	my ($db, $cell_id, $role, $version) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, sprintf(q{
CREATE EXTENSION claims_cell %s;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user '%s', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => %d);
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id'%s);
SELECT claims_cell.claim_column('users', 'email', 'EMAILS', 'USER', 'id'%s);
}, $version ? "VERSION '$version'" : '', $store->host, $store->port, $role, $cell_id,
		# declarations made before the update stay deferred; a fresh one asks for it
		($version ? '' : ', NULL, true, true') x 2));
	return;
}

set_up('upgraded', 1, 'cell_one', $first);
is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'claims_cell'}),
	$first, "installed at $first");
$node->safe_psql('upgraded', q{INSERT INTO users VALUES (1, 'alice', 'alice@example.com'), (2, 'bob', 'bob@example.com')});
$node->safe_psql('upgraded', q{SELECT claims_cell.set_claiming('users', 'email', false)});
# a lease row left for recovery
$node->safe_psql('upgraded', q{INSERT INTO claims_cell.outstanding_leases (uuid) VALUES ('00000000-0000-7000-8000-000000000001')});

my $tables = member_tables($node, 'upgraded', 'claims_cell');
cmp_ok(scalar @$tables, '>=', 3, 'the extension owns tables');
my %before = map { $_->[0] => table_rows($node, 'upgraded', @$_) } @$tables;
my $users = table_rows($node, 'upgraded', 'users', '*');

for my $v (@steps)
{
	$node->safe_psql('upgraded', "ALTER EXTENSION claims_cell UPDATE TO '$v'");
	is($node->safe_psql('upgraded', q{SELECT extversion FROM pg_extension WHERE extname = 'claims_cell'}),
		$v, "updated to $v");
}
set_up('fresh', 1, 'cell_one', undef);
$node->safe_psql('fresh', q{SELECT claims_cell.set_claiming('users', 'email', false)});

my $fresh_image = database_image($node, 'fresh');
like($fresh_image, qr/ALTER EXTENSION claims_cell ADD FUNCTION claims_cell\.reconcile/,
	'the image lists the extension\'s members one by one');
like($fresh_image, qr/CREATE TRIGGER .* ON public\.users/, 'and the triggers of the claimed table');
same_text(database_image($node, 'upgraded'), $fresh_image,
	'updated in place: the same objects, definitions and privileges as a fresh install');
is( extension_registration($node, 'upgraded', 'claims_cell'),
	extension_registration($node, 'fresh', 'claims_cell'),
	'the same version, schema, owner and config-dump registrations');

for my $t (@$tables)
{
	is(table_rows($node, 'upgraded', @$t), $before{ $t->[0] }, "$t->[0]: every row kept");
}
is(table_rows($node, 'upgraded', 'users', '*'), $users, 'the claimed table is untouched');

# It goes on claiming: a new value commits at the store, a value the other
# cell takes is refused there, and reconcile() (1.1) works on the old row.
$node->safe_psql('upgraded', q{INSERT INTO users VALUES (3, 'carol', 'carol@example.com')});
is( $store->safe_psql('postgres', q{SELECT creator_id || ' ' || status FROM claims WHERE bucket_value = 'carol'}),
	'1 ACTIVE', 'a claim after the update commits at the store');
my $lease = $store->safe_psql('postgres', q{
SET ROLE cell_two;
SELECT claims_begin_update('{"cell_id": 2, "create_records": [{"bucket": {"type": "USERNAMES", "value": "dave"}, "subject": {"type": "USER", "id": 9}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 9}}]}') ->> 'lease_uuid'});
$store->safe_psql('postgres', "SET ROLE cell_two; SELECT claims_commit(2, '$lease')");
my ($rc, $out, $err) = $node->psql('upgraded', q{INSERT INTO users VALUES (4, 'dave', NULL)});
like($err, qr/already claimed by another cell/, 'a value another cell owns is refused at COMMIT');
my $rows = $node->safe_psql('upgraded', 'SELECT count(*) FROM claims_cell.outstanding_leases');
cmp_ok($rows, '>=', 2, 'lease rows are waiting: the one from before the update and committed ones');
is( $node->safe_psql('upgraded', q{
SET claims_cell.cleanup_after = 0; SET claims_cell.orphan_after = 0;
SELECT orphans_deleted FROM claims_cell.reconcile()}),
	$rows, 'reconcile() settles every lease row, the one from before the update included');
is($node->safe_psql('upgraded', 'SELECT count(*) FROM claims_cell.outstanding_leases'), '0', 'none is left');

$node->stop;
$store->stop;
done_testing();
