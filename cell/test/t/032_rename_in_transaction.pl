# The COMMIT-time check of rows holding a claimed value finds the column by
# its attribute number: a transaction that writes a claimed value and then
# renames or drops the column, or drops the table, commits as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE doomed (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('doomed', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');
});

my ($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO users VALUES (1, 'alice');
ALTER TABLE users RENAME COLUMN username TO login;
COMMIT;
});
is($st, '00000', 'a row written then its claimed column renamed commits') or diag($err);
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'alice' AND status = 'ACTIVE'}),
	'1', 'and its value is claimed');
ok($node->safe_psql('cell1', 'SELECT 1') eq '1', 'the cell is still up');

($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO doomed VALUES (1, 'carol');
DROP TABLE doomed;
COMMIT;
});
is($st, '00000', 'a row written then its table dropped commits') or diag($err);

$node->safe_psql('cell1', q{CREATE TABLE gone (id bigint PRIMARY KEY, username text, extra text);
SELECT claims_cell.claim_column('gone', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');});
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO gone VALUES (1, 'erin');
ALTER TABLE gone DROP COLUMN username;
COMMIT;
});
is($st, '00000', 'a row written then its claimed column dropped commits') or diag($err);

$node->stop;
$store->stop;
done_testing();
