# A claimed table dropped in the transaction that wrote its rows: COMMIT
# must not fail with an internal error from PRE_COMMIT's holder check.
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
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE INDEX ON users (username);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

my ($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO users VALUES (1, 'gone');
DROP TABLE users;
COMMIT;
});
unlike($err // '', qr/could not open relation|cache lookup failed/,
	'COMMIT after dropping the written table raises no internal error');
isnt($st, 'XX000', 'no XX000 at COMMIT');
diag("state=" . ($st // 'undef') . " err=" . ($err // ''));

# ALTER COLUMN TYPE in the same transaction: attnum stays, index rebuilt
($st, $out, $err) = sql_state($node, 'cell1', q{
CREATE TABLE u2 (id bigint PRIMARY KEY, username text);
CREATE INDEX ON u2 (username);
SELECT claims_cell.claim_column('u2', 'username', 'USERNAMES', 'USER', 'id');
});
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO u2 VALUES (1, 'alt');
ALTER TABLE u2 ALTER COLUMN username TYPE varchar(20);
COMMIT;
});
diag("alter: state=" . ($st // 'undef') . " err=" . ($err // ''));
isnt($st, 'XX000', 'no XX000 after ALTER TYPE');

done_testing();
