# A row going away whose value the store does not hold is told apart by
# asking the store (claims_get_record), not by finding the value's label in
# the refusal's text: a value whose text contains another value's label
# cannot make the release of that other, claimed value be dropped.
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
});

$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'bob')});
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'bob' AND status = 'ACTIVE'}),
	'1', 'bob is claimed');
# a row written with the triggers off (restored): its value is not claimed
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (2, 'x{USERNAMES=bob} (not claimed)');
});

my ($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users});
is($st, '00000', 'deleting both rows commits') or diag($err);
note($err);
is($node->safe_psql('cell1', q{SELECT count(*) FROM users}), '0', 'no row is left');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'bob' AND status = 'ACTIVE'}),
	'0', 'bob, whose row was deleted, is released at the store');

$node->stop;
$store->stop;
done_testing();
