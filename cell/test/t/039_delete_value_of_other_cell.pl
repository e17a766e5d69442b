# A row whose value the store holds for another cell (a restored row; a
# value another cell took after a failover lost this cell's claim) can be
# deleted: the release is dropped with a WARNING, as for a value nobody
# claims.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
my $tables = q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
};
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => $tables);
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => $tables);

$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken')});
# cell 1 gets a row of the same value without claiming it (restored)
$node->safe_psql('cell1', q{SET session_replication_role = replica; INSERT INTO users VALUES (5, 'taken'), (6, 'mine-unclaimed')});

my ($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users});
is($st, '00000', 'cell 1 deletes its rows, none of whose values the store holds for it') or diag($err);
is($node->safe_psql('cell1', q{SELECT count(*) FROM users}), '0', 'they are gone');
is($store->safe_psql('postgres', q{SELECT creator_id FROM claims WHERE bucket_value = 'taken' AND status = 'ACTIVE'}),
	'2', 'cell 2 keeps its claim');

$node->stop;
$store->stop;
done_testing();
