# The store loses the lease of a transaction the cell committed (as a
# failover to a standby that had not received it does): the committed
# rows' values are claimed again by the next reconcile() pass from the
# request kept in the lease's local row, instead of the row waiting for
# orphan_after (1 h) while another cell may take the values.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
claims_cell.cleanup_after = 0
});
my $tables = q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
};
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => $tables);
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => $tables);

# Three committed transactions: a create, a rename (destroy and create),
# and a create whose value another cell takes once the store lost it.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'kept'), (2, 'old-name'), (3, 'contested')});
$node->safe_psql('cell1', q{UPDATE users SET username = 'new-name' WHERE id = 2});
my $rows = $node->safe_psql('cell1',
	q{SELECT count(*) FROM claims_cell.outstanding_leases WHERE request IS NOT NULL});
cmp_ok($rows, '>=', 1, 'the committed leases\' local rows keep their requests');

# The store loses every lease of cell 1 and the claims they made.
$store->safe_psql('postgres', q{
SET session_replication_role = replica;
DELETE FROM claims WHERE creator_id = 1;
DELETE FROM claim_leases WHERE creator_id = 1;
});
# meanwhile the second cell takes one of the lost values
my ($st, $out, $err) = sql_state($node, 'cell2', q{INSERT INTO users VALUES (9, 'contested')});
is($st, '00000', 'another cell takes a value the store forgot') or diag($err);

($st, $out, $err) = sql_state($node, 'cell1', q{SELECT * FROM claims_cell.reconcile()});
is($st, '00000', 'reconcile() runs') or diag($err);
like($err, qr/the claims store lost \d+ leases of committed transactions; 2 of their values claimed again, 0 released/,
	'it says it claims the lost values again');
like($err, qr/Not claimed: \{USERNAMES=contested\} is claimed by cell 2/, 'and which it could not');

is( $store->safe_psql('postgres', q{
SELECT string_agg(bucket_value || ':' || creator_id, ',' ORDER BY bucket_value) FROM claims WHERE status = 'ACTIVE'}),
	'contested:2,kept:1,new-name:1',
	'the committed rows\' values are claimed again (the taken one stays the other cell\'s)');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'no lease stays outstanding');
is( $node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users')}),
	'1|0|0|0|0', 'verify() finds only the value the other cell took');

done_testing();
