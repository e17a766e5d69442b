# Several rows changing one value in one statement: rows that swap or
# rotate their values. At the store each value ends with the subject and
# source of the local row that holds it.
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
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# "value:subject:source" of the given values, locally and at the store.
sub local_rows
{
	my ($like) = @_;
	return $node->safe_psql('cell1', qq{
SELECT string_agg(username || ':' || id || ':' || id, ',' ORDER BY username)
  FROM users WHERE username LIKE '$like'});
}

sub store_rows
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT string_agg(bucket_value || ':' || subject_id || ':' || ('x' || encode(source_id, 'hex'))::bit(64)::bigint
                  || CASE WHEN status <> 'ACTIVE' THEN ':' || status ELSE '' END, ',' ORDER BY bucket_value)
  FROM claims WHERE bucket_value LIKE '$like'});
}

sub no_outstanding
{
	return $store->safe_psql('postgres', q{
SELECT count(*) FROM claim_leases WHERE state = 'outstanding'});
}

# Two rows swap their names in one UPDATE.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (901, 'swa'), (902, 'swb')});
is(store_rows('sw%'), 'swa:901:901,swb:902:902', 'before the swap');
$node->safe_psql('cell1',
	q{UPDATE users SET username = CASE id WHEN 901 THEN 'swb' ELSE 'swa' END WHERE id IN (901, 902)});
is(local_rows('sw%'), 'swa:902:902,swb:901:901', 'locally the names are swapped');
is(store_rows('sw%'), local_rows('sw%'), 'the store follows the swap');
is(no_outstanding(), '0', 'no lease outstanding');

# And back, in the other row order.
$node->safe_psql('cell1',
	q{UPDATE users SET username = CASE id WHEN 902 THEN 'swb' ELSE 'swa' END WHERE id IN (902, 901)});
is(store_rows('sw%'), 'swa:901:901,swb:902:902', 'the store follows the swap back');

# Three rows rotate their names in one UPDATE, twice.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (911, 'rot1'), (912, 'rot2'), (913, 'rot3')});
for my $turn (1, 2)
{
	$node->safe_psql('cell1', q{
UPDATE users SET username = 'rot' || ((substr(username, 4)::int % 3) + 1) WHERE id IN (911, 912, 913)});
	is(store_rows('rot%'), local_rows('rot%'), "rotation $turn: the store follows");
}
is(local_rows('rot%'), 'rot1:912:912,rot2:913:913,rot3:911:911', 'the rotation turned twice');

# A swap in one transaction of several statements, through a free name.
$node->safe_psql('cell1', q{
BEGIN;
UPDATE users SET username = 'tmp' WHERE id = 901;
UPDATE users SET username = 'swa' WHERE id = 902;
UPDATE users SET username = 'swb' WHERE id = 901;
COMMIT;
});
is(store_rows('sw%'), local_rows('sw%'), 'a swap through a free name');
is(store_rows('tmp'), '', 'the free name is not claimed');

# A row leaves a value and another row of a new key takes it.
$node->safe_psql('cell1', q{
BEGIN;
DELETE FROM users WHERE id = 913;
INSERT INTO users VALUES (914, 'rot2');
COMMIT;
});
is(store_rows('rot2'), 'rot2:914:914', 'a value handed to a new row');
is(no_outstanding(), '0', 'no lease outstanding at the end');

$node->stop;
$store->stop;
done_testing();
