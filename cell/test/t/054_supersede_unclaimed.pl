# A statement lease superseded at COMMIT whose final state releases a
# value the store never held for the cell (a row written with the triggers
# off) and takes the same value again. The superseding store transaction
# rolls the old lease back, which frees its own create of the value, so the
# destroy of the new lease finds nothing: the cell must see that its own
# superseded create was what the store held, drop the destroy with the
# usual WARNING and commit, as it does when no lease is superseded.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', q{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1h'
claims_cell.verify_interval = 0
});
# no unique index on username: rows written with the triggers off may share a value
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SET session_replication_role = replica;
INSERT INTO users VALUES (1, 'legacy1'), (3, 'legacy3'), (5, 'legacy5');
});

# What the store holds of the values, and the leases still outstanding.
sub store_state
{
	return $store->safe_psql('postgres', q{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || creator_id, ',' ORDER BY bucket_value), '')
  || ' outstanding=' || (SELECT count(*) FROM claim_leases WHERE state = 'outstanding')
FROM claims});
}

# Two statements: the INSERT leases its create of legacy1; the DELETE of
# the unclaimed row holding it changes the same value again, so COMMIT
# supersedes the statement's lease with one that replaces it.
my ($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN;
INSERT INTO users VALUES (2, 'legacy1');
DELETE FROM users WHERE id = 1;
COMMIT;});
is($st, '00000', 'the COMMIT of a new holder after deleting an unclaimed one succeeds') or diag($err);
like($err, qr/WARNING:.*value "legacy1" of column "username" of table "users" was not claimed at the claims store/,
	'with the WARNING for the value the store did not hold');
is($node->safe_psql('cell1', q{SELECT string_agg(id::text, ',' ORDER BY id) FROM users WHERE username = 'legacy1'}),
	'2', 'the new row holds legacy1 locally');
is(store_state(), 'legacy1:ACTIVE:1 outstanding=0', 'the store holds legacy1 for the cell, no lease left');

# One statement: the INSERT's statement lease is taken before the CTE's
# DELETE of the unclaimed holder is seen, and COMMIT supersedes it.
($st, $out, $err) = sql_state($node, 'cell1',
	q{WITH d AS (DELETE FROM users WHERE id = 3) INSERT INTO users VALUES (4, 'legacy3')});
is($st, '00000', 'one statement replacing an unclaimed holder succeeds') or diag($err);
is(store_state(), 'legacy1:ACTIVE:1,legacy3:ACTIVE:1 outstanding=0', 'the store holds legacy3 for the cell');

# The other order: the DELETE first, then the INSERT of the same value.
($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN;
DELETE FROM users WHERE id = 5;
INSERT INTO users VALUES (6, 'legacy5');
COMMIT;});
is($st, '00000', 'deleting the unclaimed holder first, then taking the value, succeeds') or diag($err);
is(store_state(), 'legacy1:ACTIVE:1,legacy3:ACTIVE:1,legacy5:ACTIVE:1 outstanding=0',
	'the store holds legacy5 for the cell');

is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0;
SELECT missing || ',' || extra || ',' || drifted FROM claims_cell.verify('users')}),
	'0,0,0', 'verify() finds the cell and the store in agreement');

$node->stop;
$store->stop;
done_testing();
