# Review of ed761c5: a 1.4 database (ALTER EXTENSION not run yet) with the
# 1.5 library.
# 1. claim_column accepts a partitioned table (PRIMARY KEY (id), PARTITION
#    BY HASH (id)) although the 1.4 schema has no DDL event trigger: a
#    partition created later gets the cloned row trigger but no statement
#    and TRUNCATE triggers, so a statement naming it claims only at COMMIT
#    and TRUNCATE of it releases nothing.
# 2. The 1.4 rows_holding(regclass, smallint, text, smallint, smallint)
#    is bound to the same C symbol, which now reads its fifth argument as
#    smallint[]: claim_again() (reconcile of lost leases) or any call
#    crashes the server (SIGSEGV). Last, since it takes the node down.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
$store->safe_psql('postgres', q{GRANT SELECT, INSERT ON claim_source_types TO cell_one});
my $node = cell_node('cells', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users VALUES (1, 'taken');
});
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', sprintf(q{
CREATE EXTENSION claims_cell VERSION '1.4';
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => 1);
CREATE TABLE hp (id bigint PRIMARY KEY, u text) PARTITION BY HASH (id);
CREATE TABLE hp_0 PARTITION OF hp FOR VALUES WITH (MODULUS 2, REMAINDER 0);
}, $store->host, $store->port));

my ($st, $out, $err) = sql_state($node, 'old', q{SELECT claims_cell.claim_column('hp', 'u', 'USERNAMES', 'USER', 'id')});
if ($st eq '00000')
{
	$node->safe_psql('old', q{CREATE TABLE hp_1 PARTITION OF hp FOR VALUES WITH (MODULUS 2, REMAINDER 1)});
	is($node->safe_psql('old', q{SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'hp_1'::regclass}),
		'claims_cell_statement,claims_cell_truncate,claims_cell_u',
		'a partition created later in a 1.4 database has its statement and TRUNCATE triggers');
	# id 5 hashes to hp_1
	($st, $out) = sql_state($node, 'old', q{BEGIN; INSERT INTO hp_1 VALUES (5, 'taken'); SELECT 'after the insert'; ROLLBACK;});
	is($st, '23505', 'a value another cell owns fails at the statement naming that partition');
	unlike($out, qr/after the insert/, 'not at COMMIT');
	$node->safe_psql('old', q{INSERT INTO hp_1 VALUES (5, 'old-one'); TRUNCATE hp_1;});
	is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'old-one' AND status = 'ACTIVE'}),
		'0', 'TRUNCATE of that partition releases its values');
}
else
{
	is($st, '0A000', 'claim_column refuses a partitioned table before ALTER EXTENSION UPDATE');
	like($err, qr/is a partitioned table/, 'and says why');
}

$node->safe_psql('old', q{CREATE TABLE users (id bigint PRIMARY KEY, username text); INSERT INTO users VALUES (1, 'alice')});
($st, $out, $err) = sql_state($node, 'old',
	q{SELECT count(*) FROM claims_cell.rows_holding('users', 2::smallint, 'alice', 1::smallint, 1::smallint)});
unlike($err, qr/server closed the connection unexpectedly/, 'the 1.4 rows_holding() does not crash the server') or diag($err);
is($out, '1', 'and finds the row holding the value');
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');

done_testing();
