# TRUNCATE of a claimed table by its owner, a role that is not a superuser
# and has no USAGE on the schema claims_cell (as Django's flush runs as the
# application's role): it releases the values as the superuser's TRUNCATE
# does, and in a copy of the cell it gets the copy's 55000, not 42501. The
# TRUNCATE trigger used to name claims_cell.collect() through the parser's
# lookup, which checks USAGE on its schema as the current user.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cells');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE ROLE app LOGIN;
GRANT CREATE ON SCHEMA public TO app;
SET ROLE app;
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE TABLE keys (id bigint PRIMARY KEY, fingerprint text);
RESET ROLE;
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'id',
         "deferrable" => true, initially_deferred => true);
});
is($node->safe_psql('cell1', q{SELECT has_schema_privilege('app', 'claims_cell', 'USAGE')}), 'f',
	'the application role has no USAGE on the schema claims_cell');

sub as_app
{
	my ($db, $sql) = @_;
	return sql_state($node, $db, "SET ROLE app;\n$sql");
}

sub store_values
{
	return $store->safe_psql('postgres',
		q{SELECT coalesce(string_agg(bucket_value || ':' || status, ',' ORDER BY bucket_value), '') FROM claims});
}

my ($st, $out, $err) = as_app('cell1', q{
INSERT INTO users VALUES (1, 'alice'), (2, 'bob');
INSERT INTO keys VALUES (1, 'fp-1');});
is($st, '00000', 'the owner\'s INSERT is claimed') or diag($err);
is(store_values(), 'alice:ACTIVE,bob:ACTIVE,fp-1:ACTIVE', 'at the store');

# The copy first, while the rows are there: a test database cloned from the cell.
$node->safe_psql('postgres', 'CREATE DATABASE copy1 TEMPLATE cell1');
($st, $out, $err) = as_app('copy1', 'TRUNCATE users');
is($st, '55000', 'in a copy the owner\'s TRUNCATE gets the copy\'s refusal') or diag($err);
like($err, qr/this database is a copy of the database of cell 1/, 'naming the cell');
($st, $out, $err) = as_app('copy1', 'BEGIN; TRUNCATE keys; COMMIT;');
is($st, '55000', 'a deferred column\'s TRUNCATE in the copy fails at COMMIT the same way') or diag($err);
is(store_values(), 'alice:ACTIVE,bob:ACTIVE,fp-1:ACTIVE', 'the copy released nothing');

($st, $out, $err) = as_app('cell1', 'TRUNCATE users');
is($st, '00000', 'the owner truncates a claimed table') or diag($err);
is(store_values(), 'fp-1:ACTIVE', 'its values are released at the store');
($st, $out, $err) = as_app('cell1', 'BEGIN; TRUNCATE keys; COMMIT;');
is($st, '00000', 'and a deferred one, at COMMIT') or diag($err);
is(store_values(), '', 'nothing stays claimed');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'no lease stays outstanding');

# The same rows again, so the cell and the store agree afterwards.
($st) = as_app('cell1', q{INSERT INTO users VALUES (3, 'carol')});
is($st, '00000', 'the owner claims again after the TRUNCATE');
is($node->safe_psql('cell1', q{SELECT sum(missing + extra + drifted) FROM claims_cell.verify('users')}), '0',
	'verify() finds the cell and the store in agreement');

done_testing();
