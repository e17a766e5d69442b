# Before 1.4 a char(n) value was claimed with its padding ('ab   '); 1.4
# claims it unpadded ('ab'). The store below holds what the old library
# claimed for cell 1. verify() with repair, which the 1.4 update starts for
# such tables, brings the claim to the new form: then another cell cannot
# claim 'ab', and cell 1 deleting its row leaves nothing claimed.
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
CREATE TABLE users (id bigint PRIMARY KEY, username char(5));
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
};
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => $tables);
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => $tables);

# cell 1 before the update: row 1 holds 'ab', claimed as its output 'ab   '
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (1, 'ab');
RESET session_replication_role;
BEGIN;
SELECT sqlstate FROM claims_cell.store_repair_lease('topology', 1,
  pg_catalog.jsonb_build_array(pg_catalog.jsonb_build_object(
    'bucket', pg_catalog.jsonb_build_object('type', 'USERNAMES', 'value', 'ab   '),
    'subject', pg_catalog.jsonb_build_object('type', 'USER', 'id', '1'),
    'source', pg_catalog.jsonb_build_object('type', 'RAILS_TABLE_USERS',
                 'rails_primary_key_id', claims_cell.source_id_text(pg_catalog.int8send(1))))),
  '[]');
COMMIT;
});
is( $store->safe_psql('postgres', q{SELECT string_agg(bucket_value || ':' || creator_id, ',') FROM claims WHERE status = 'ACTIVE'}),
	'ab   :1', 'the store holds cell 1\'s claim of the padded form');

# The step the 1.4 update names for tables with char(n) columns.
is( $node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0;
SELECT missing, extra, repaired FROM claims_cell.verify('users', repair => true)}),
	'1|1|2', 'verify() repairs the padded claim into the unpadded one');
is( $store->safe_psql('postgres', q{SELECT string_agg(bucket_value || ':' || creator_id, ',') FROM claims WHERE status = 'ACTIVE'}),
	'ab:1', 'the store holds the unpadded form for cell 1');

my ($st, $out, $err) = sql_state($node, 'cell2', q{INSERT INTO users VALUES (7, 'ab')});
is($st, '23505', 'another cell cannot claim the value cell 1 holds') or diag($err);

($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 1});
is($st, '00000', 'cell 1 deletes its row') or diag($err);
note($err);
is( $store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE creator_id = 1 AND status = 'ACTIVE'}),
	'0', 'and nothing stays claimed for it');

$node->stop;
$store->stop;
done_testing();
