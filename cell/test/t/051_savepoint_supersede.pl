# A savepoint rolled back (even an empty one) rebuilds the transaction's
# records of its values; a statement lease taken before it must still be
# superseded at COMMIT with the values' final state, not with the records
# of before the rollback.
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
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# The store's state of a value for cell 1: status, or '' when not claimed.
sub claim_of
{
	my ($v) = @_;
	return $store->safe_psql('postgres',
		"SELECT string_agg(status::text, ',') FROM claims WHERE bucket_value = '$v' AND creator_id = 1");
}

$node->safe_psql('cell1', q{
BEGIN;
INSERT INTO users VALUES (1, 'rb-a');
SAVEPOINT s;
ROLLBACK TO s;
DELETE FROM users WHERE id = 1;
COMMIT;
});
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'rb-a'}), '0',
	'no row holds rb-a');
is(claim_of('rb-a'), '', 'so the store does not hold rb-a for the cell');

$node->safe_psql('cell1', q{INSERT INTO users VALUES (2, 'rb-c')});
$node->safe_psql('cell1', q{
BEGIN;
DELETE FROM users WHERE id = 2;
SAVEPOINT s;
ROLLBACK TO s;
INSERT INTO users VALUES (4, 'rb-c');
COMMIT;
});
is($node->safe_psql('cell1', q{SELECT id FROM users WHERE username = 'rb-c'}), '4',
	'a row holds rb-c');
is(claim_of('rb-c'), 'ACTIVE', 'so the store holds rb-c for the cell');

$node->stop;
$store->stop;
done_testing();
