# reconcile() claims lost values again in leases of at most the batch
# size: more lost values than the store's claims.max_batch_size are all
# claimed again. Here the store's limit is 4 and the cell's leases are at
# most 4 records.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
$store->append_conf('postgresql.conf', "claims.max_batch_size = 4\n");
$store->reload;
my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
claims_cell.cleanup_after = 0
claims_cell.max_batch_size = 4
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

$node->safe_psql('cell1', "INSERT INTO users VALUES ($_, 'user$_')") for 1 .. 6;
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status = 'ACTIVE'}), '6', 'six values claimed');

$store->safe_psql('postgres', q{
SET session_replication_role = replica;
DELETE FROM claims WHERE creator_id = 1;
DELETE FROM claim_leases WHERE creator_id = 1;
});

for my $pass (1 .. 3)
{
	my ($st, $out, $err) = sql_state($node, 'cell1', q{SELECT * FROM claims_cell.reconcile()});
	note("pass $pass: $st $out $err");
}
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status = 'ACTIVE'}), '6',
	'three reconcile() passes claim the six lost values again');

$node->stop;
$store->stop;
done_testing();
