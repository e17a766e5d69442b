# claims_cell.verify() reads the store's listing of records as text, in
# pages: the source id a truncated page ends with must be its last record's
# metadata.source.rails_primary_key_id, whatever else the records hold. A
# record's user_data is any JSON a client gave the store, and it may use the
# same key; a value may hold the key's text too. Neither may cut the listing
# short (rows past the first page would look missing and be claimed again).
# Values the JSON text escapes or that sort differently under an ICU
# collation than bytewise are compared exactly.
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

# the store answering its clients in the proto3 JSON mapping (camelCase
# names, defaults left out): the cell's own calls still read the compat one
$store->safe_psql('postgres', q{ALTER ROLE cell_one SET claims.json_output = proto3});
is(verify(), '0|0|0|0', 'a store set to proto3 JSON for the cell\'s role lists the same records');
$store->safe_psql('postgres', q{ALTER ROLE cell_one RESET claims.json_output});
# ...and still when the store lets no ordinary role call set_config()
$store->safe_psql('postgres', q{ALTER ROLE cell_one SET claims.json_output = proto3;
REVOKE EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) FROM PUBLIC});
is(verify(), '0|0|0|0', 'a store that revoked set_config() from PUBLIC still answers the cell in compat JSON');
$store->safe_psql('postgres', q{ALTER ROLE cell_one RESET claims.json_output;
GRANT EXECUTE ON FUNCTION pg_catalog.set_config(text, text, boolean) TO PUBLIC});

# (an ICU collation: skipped on a server built without ICU, such as the
# assertion-enabled one of `make test PG=15-cassert`)
SKIP:
{
	skip 'the server was built without ICU', 5
	  unless $node->safe_psql('postgres',
		q{SELECT count(*) > 0 FROM pg_collation WHERE collprovider = 'i'}) eq 't';

	# a database whose collation orders values otherwise than their bytes,
	# values with escapes in JSON, multibyte ones, the longest claimable one
	add_cell(node => $node, store => $store, db => 'cell2', role => 'cell_two', cell_id => 2,
		create_options => q{TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C.utf8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US'},
		sql => q{
	CREATE TABLE users (id bigint PRIMARY KEY, username text);
	SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
	INSERT INTO users VALUES (1, 'Case'), (2, 'case'), (3, 'b'), (4, 'B'), (5, '_under'), (6, 'Zed'),
	  (7, E'tab\there'), (8, E'back\\slash'), (9, 'quote"q'), (10, 'ß'), (11, 'ss'), (12, '😀 emoji'),
	  (13, E'new\nline'), (14, repeat('é', 1024)), (15, 'ﬁ'), (16, 'fi'), (17, E'\u00e9'), (18, E'e\u0301');
	});
	my $v2 = q{SET claims_cell.verify_recent = 0;
	SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users')};
	is($node->safe_psql('cell2', q{SELECT 'Zed' > 'b' AND 'Zed' COLLATE "C" < 'b' AND 'case' < 'CASE'}), 't',
		'the database orders values otherwise than their bytes');
	is($node->safe_psql('cell2', $v2), '0|0|0|0', 'escaped, multibyte and case-different values match');
	# changes behind the triggers: a value changed only in case, one swapped
	# for its other normalization, one moved to another row
	$node->safe_psql('cell2', q{SET session_replication_role = replica;
	UPDATE users SET username = 'CASE' WHERE id = 1;
	UPDATE users SET username = E'e\u0301\u0301' WHERE id = 18;
	UPDATE users SET username = NULL WHERE id = 9;
	INSERT INTO users VALUES (19, 'quote"q');});
	is($node->safe_psql('cell2', $v2), '2|2|1|0',
		'a value changed in case or normalization is missing and extra, a moved one drifted');
	is($node->safe_psql('cell2', $v2 =~ s/'users'\)/'users', repair => true)/r), '2|2|1|5', 'repaired');
	is($node->safe_psql('cell2', $v2), '0|0|0|0', 'nothing left after the repair');
}

done_testing();
