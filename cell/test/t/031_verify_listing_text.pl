# claims_cell.verify() reads the store's listing of records as text, in
# pages: the source id a truncated page ends with must be its last record's
# metadata.source.rails_primary_key_id, whatever else the records hold. A
# record's user_data is any JSON a client gave the store, and it may use the
# same key; a value may hold the key's text too. Neither may cut the listing
# short (rows past the first page would look missing and be claimed again).
# A listing that is not JSON is refused as a protocol violation.
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
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# 600 rows: three pages of the store's listing (250 records a page); one
# value holds the text of the key the page's end is read by.
$node->safe_psql('cell1', q{
INSERT INTO users SELECT i, 'user' || i FROM generate_series(1, 599) i;
INSERT INTO users VALUES (600, 'x"rails_primary_key_id": "/////////////w==');
});

sub verify
{
	return $node->safe_psql('cell1',
		"SET claims_cell.verify_recent = 0;\nSELECT missing, extra, drifted, repaired FROM claims_cell.verify('users')");
}

is(verify(), '0|0|0|0', 'the claims of 600 rows listed in pages match them');

# a client's user_data with the key that names a source id, holding one
# past every real source id
my $n = $store->safe_psql('postgres', q{
UPDATE claims SET user_data = '{"rails_primary_key_id": "/////////////w=="}' WHERE creator_id = 1;
SELECT count(*) FROM claims WHERE creator_id = 1 AND user_data ? 'rails_primary_key_id'});
is($n, '600', 'every record of the cell has user_data naming a source id');
is(verify(), '0|0|0|0', 'user_data naming a source id does not cut the listing short');

# the same key in user_data with a source id before the page's last one
$store->safe_psql('postgres', q{
UPDATE claims SET user_data = '{"rails_primary_key_id": "AAAAAAAAAAE="}' WHERE creator_id = 1});
is(verify(), '0|0|0|0', 'user_data naming an earlier source id does not stall the listing');

done_testing();
