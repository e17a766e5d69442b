
# pg_dump and restore keep the registries, claims and leases whole.
#
# pg_dump keeps only the registry rows an operator added (WHERE NOT
# builtin); CREATE EXTENSION recreates the built-in rows as shipped. An
# operator adds types and aliases to them; changes to built-in rows (an
# alias on a built-in type, a row inserted as built-in, a delete, TRUNCATE)
# are refused with 42501 and change nothing, since a dump and restore would
# silently lose them. The database is then dumped (custom format restored
# with pg_restore, plain format with psql) into new databases, whose
# registries, claims, leases, cells and audit log must equal the original,
# and whose API must work on them as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_claims_node('dump');

sub api
{
	my ($sql, $db) = @_;
	return $node->safe_psql($db // 'postgres', $sql);
}

sub begin_update
{
	my ($req, $db) = @_;
	return api('SELECT claims_begin_update(' . sql_quote(enc($req)) . "::jsonb)->>'lease_uuid'", $db);
}

# Every row of the three registries, as text, in key order.
my $registries = join(' UNION ALL ',
	map { "(SELECT '$_', type_id, t::text FROM $_ t)" }
	  qw(claim_bucket_types claim_subject_types claim_source_types)) . ' ORDER BY 1, 2';

# Everything a dump must keep, table by table: rows as text in key order.
my %content = (
	registries => $registries,
	claims => 'SELECT c::text FROM claims c ORDER BY uuid',
	claim_leases => 'SELECT l::text FROM claim_leases l ORDER BY uuid',
	claim_cells => 'SELECT c::text FROM claim_cells c ORDER BY cell_id',
	claim_admin_actions => 'SELECT a::text FROM claim_admin_actions a ORDER BY action_id',
);

# Run a statement that must fail; returns its SQLSTATE (or 'ok').
sub sqlstate_of
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return 'ok' if $rc == 0;
	return $err =~ /ERROR:  ([0-9A-Z]{5}):/ ? $1 : "unknown: $err";
}

# 1. An operator adds types, and aliases to them.
api(<<'EOS');
INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (19, 'WIKI_SLUGS', 'wiki_slug');
UPDATE claim_bucket_types SET aliases = '{WIKIS}' WHERE type_id = 19;
INSERT INTO claim_bucket_types (type_id, name, integer_valued) VALUES (20, 'WIKI_IDS', true);
INSERT INTO claim_subject_types (type_id, name, aliases) VALUES (9, 'BOT', '{ROBOT}');
INSERT INTO claim_source_types (type_id, name) VALUES (20, 'RAILS_TABLE_WIKIS');
UPDATE claim_source_types SET aliases = '{RAILS_TABLE_WIKI_PAGES}' WHERE type_id = 20;
EOS
is(api("SELECT string_agg(name || ':' || aliases::text, ' ' ORDER BY name) FROM claim_bucket_types WHERE NOT builtin"),
	'WIKI_IDS:{} WIKI_SLUGS:{WIKIS}', 'an operator adds bucket types and an alias to one');

# 2. Changes to built-in rows are refused and change nothing.
my $before = api($registries);
my @refused = (
	[ q{UPDATE claim_bucket_types SET aliases = '{USERNAME}' WHERE name = 'USERNAMES'},
		'an alias on a built-in bucket type' ],
	[ q{UPDATE claim_subject_types SET aliases = '{GROUP,TEAM}' WHERE name = 'NAMESPACE'},
		'another alias on a built-in subject type' ],
	[ q{UPDATE claim_source_types SET name = 'RAILS_TABLE_ACCOUNTS' WHERE type_id = 1},
		'a rename of a built-in source type' ],
	[ q{UPDATE claim_bucket_types SET builtin = false WHERE type_id = 4},
		'unmarking a built-in row' ],
	[ q{INSERT INTO claim_bucket_types (type_id, name, builtin) VALUES (21, 'GADGETS', true)},
		'a row inserted as built-in' ],
	[ q{UPDATE claim_bucket_types SET builtin = true WHERE type_id = 19},
		'an operator row made built-in' ],
	[ q{DELETE FROM claim_source_types WHERE type_id = 9},
		'a delete of a built-in row' ],
	[ q{DELETE FROM claim_subject_types}, 'a delete of every row' ],
	[ q{TRUNCATE claim_bucket_types}, 'TRUNCATE of a registry' ],
);
for my $r (@refused)
{
	is(sqlstate_of($r->[0]), '42501', "refused with 42501: $r->[1]");
}
is(api($registries), $before, 'the refused statements changed no registry row');

# 3. Claims and leases of built-in and new types, by name and alias: two
# committed batches, one rolled back, one outstanding create and one
# outstanding replace.
my $wiki = {
	bucket => { type => 'WIKIS', value => 'home' },
	subject => { type => 'ROBOT', id => 5 },
	source => { type => 'RAILS_TABLE_WIKI_PAGES', rails_primary_key_id => 77 },
	user_data => { '@type' => 'type.googleapis.com/wiki.Page', title => 'Home' },
};
my %lease;
$lease{a} = begin_update({ cell_id => 1,
	create_records => [ metadata('USERNAMES', 'alice', 1, 1), metadata('WIKI_IDS', '77', 1, 2), $wiki ] });
api("SELECT claims_commit(1, '$lease{a}')");
$lease{b} = begin_update({ cell_id => 2,
	create_records => [ metadata('EMAILS', 'bob@dump.test', 2, 3), metadata('PROJECT_IDS', '42', 2, 4) ] });
api("SELECT claims_commit(2, '$lease{b}')");
$lease{rolled} = begin_update({ cell_id => 2, create_records => [ metadata('USERNAMES', 'carol', 3, 5) ] });
api("SELECT claims_rollback(2, '$lease{rolled}')");
$lease{open} = begin_update({ cell_id => 3, create_records => [ metadata('ROUTES', 'dave/site', 4, 6) ] });
$lease{replace} = begin_update({ cell_id => 1,
	create_records => [ metadata('USERNAMES', 'alice', 9, 9) ],
	destroy_records => [ bucket_only('USERNAMES', 'alice') ] });
api(q{SELECT claims_rename_cell(3, 'cell-three', 'before the dump')});
is(api('SELECT count(*) FROM claims'), '6', 'six claims before the dump');
is(api("SELECT string_agg(state::text, ' ' ORDER BY created_at, uuid) FROM claim_leases"),
	'committed committed rolled_back outstanding outstanding', 'five leases in every state before the dump');
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty before the dump');

my %original = map { $_ => api($content{$_}) } keys %content;

# 4. Dump, and restore into new databases.
my $dir = PostgreSQL::Test::Utils::tempdir;
$node->command_ok([ 'pg_dump', '-Fc', '-f', "$dir/claims.dump", '-d', $node->connstr('postgres') ],
	'pg_dump (custom format) succeeds');
$node->command_ok([ 'pg_dump', '-Fp', '-f', "$dir/claims.sql", '-d', $node->connstr('postgres') ],
	'pg_dump (plain format) succeeds');
$node->command_ok([ 'createdb', '-h', $node->host, '-p', $node->port, 'restored_custom' ],
	'createdb restored_custom');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-d', $node->connstr('restored_custom'), "$dir/claims.dump" ],
	'pg_restore into restored_custom succeeds');
$node->command_ok([ 'createdb', '-h', $node->host, '-p', $node->port, 'restored_plain' ],
	'createdb restored_plain');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored_plain'),
		'-f', "$dir/claims.sql" ],
	'psql restores the plain dump into restored_plain');

# 5. The restored databases hold the same rows and work the same.
for my $db (qw(restored_custom restored_plain))
{
	for my $table (sort keys %content)
	{
		is(api($content{$table}, $db), $original{$table}, "$db: $table identical after restore");
	}
	is(api("SELECT extversion FROM pg_extension WHERE extname = 'claims'", $db), '1.3',
		"$db: claims is at version 1.3");
	is(api(q{SELECT claims_get_record('{"bucket": {"type": "WIKIS", "value": "home"}}') #>> '{record,metadata,subject,type}'}, $db),
		'BOT', "$db: a claim is found by the alias of an operator's type");
	is(api(q{SELECT claims_get_record('{"claim": {"username": "alice"}}') #>> '{record,status}'}, $db),
		'LEASE_DESTROYING', "$db: the outstanding replace is still outstanding");
	api("SELECT claims_commit(1, '$lease{replace}')", $db);
	api("SELECT claims_commit(3, '$lease{open}')", $db);
	is(api(q{SELECT string_agg(r #>> '{record,status}' || ' ' || (r #>> '{record,metadata,subject,id}'), ', ')
	         FROM (SELECT claims_get_record('{"claim": {"username": "alice"}}') AS r
	               UNION ALL SELECT claims_get_record('{"claim": {"route": "dave/site"}}')) AS x}, $db),
		'ACTIVE 9, ACTIVE 4', "$db: the outstanding leases commit after the restore");
	my ($rc, $out, $err) = $node->psql($db,
		q{UPDATE claim_bucket_types SET aliases = '{USERNAME}' WHERE name = 'USERNAMES'});
	like($err, qr/permission denied to change built-in bucket type "USERNAMES"/,
		"$db: built-in rows are still guarded");
	is(api('SELECT count(*) FROM claims_check()', $db), '0', "$db: claims_check() is empty");
}

done_testing();
