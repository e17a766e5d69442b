# TRUNCATE of a claimed table releases its values as DELETE would: at the
# end of the statement for an immediate column, at COMMIT for a deferred
# one, in leases of at most claims_cell.max_batch_size records; a rollback
# keeps them; a paused column's values stay claimed.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells', "claims_cell.max_batch_size = 10\n");
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE TABLE keys (id bigint PRIMARY KEY, user_id bigint REFERENCES users, fingerprint text);
CREATE TABLE notes (id bigint PRIMARY KEY, handle text, tag text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'user_id',
         "deferrable" => true, initially_deferred => true);
SELECT claims_cell.claim_column('notes', 'handle', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
SELECT claims_cell.claim_column('notes', 'tag', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
});
}

sub store_count
{
	my ($like) = @_;
	return $store->safe_psql('postgres',
		qq{SELECT count(*) || ':' || count(*) FILTER (WHERE status = 'ACTIVE') FROM claims WHERE bucket_value LIKE '$like'});
}

sub begin_updates
{
	return $node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats');
}

$node->safe_psql('cell1', q{
INSERT INTO users SELECT g, 'tu' || g FROM generate_series(1, 25) g;
INSERT INTO keys SELECT g, g, 'tk' || g FROM generate_series(1, 25) g;
INSERT INTO notes SELECT g, 'tn' || g, 'tt' || g FROM generate_series(1, 5) g;
});
is(store_count('tu%'), '25:25', 'users claimed');
is(store_count('tk%'), '25:25', 'keys claimed');

# A rolled back TRUNCATE keeps every value.
my ($st) = sql_state($node, 'cell1', q{BEGIN; TRUNCATE keys, users; ROLLBACK;});
is($st, '00000', 'TRUNCATE is no longer refused');
is(store_count('t%'), '60:60', 'a rolled back TRUNCATE keeps every claim');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'and leaves no lease outstanding');

# The deferred table: released at COMMIT, in leases of 10 records.
my $before = begin_updates();
($st) = sql_state($node, 'cell1', q{TRUNCATE keys});
is($st, '00000', 'TRUNCATE of the deferred table');
is(store_count('tk%'), '0:0', 'its values are released');
is(begin_updates() - $before, 3, 'in three leases of at most 10 records');
is((sql_state($node, 'cell2', q{INSERT INTO users VALUES (1, 'x'); INSERT INTO keys VALUES (1, 1, 'tk1')}))[0],
	'00000', 'another cell can take a released value');

# The immediate table: released at the end of the statement.
my $s = start_session($node, 'cell1', "BEGIN;\nTRUNCATE users CASCADE;\nSELECT 'truncated';\n");
$s->{h}->pump until $s->{out} =~ /truncated/;
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'tu%' AND status = 'LEASE_DESTROYING'}),
	'25', 'immediate: the values are leased for destruction at the statement');
$s->{in} .= "COMMIT;\n\\q\n";
$s->{h}->finish;
is(store_count('tu%'), '0:0', 'and released at COMMIT');

# Rows of the transaction itself: nothing reaches the store.
$before = begin_updates();
$node->safe_psql('cell1', q{BEGIN;
SELECT claims_cell.set_constraints('DEFERRED', 'keys');
INSERT INTO users VALUES (100, 'tx1');
INSERT INTO keys VALUES (100, 100, 'tkx');
TRUNCATE keys, users;
COMMIT;});
is(store_count('tx%') . ',' . store_count('tkx'), '0:0,0:0', 'values inserted and truncated in one transaction are not claimed');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'no lease outstanding');

# A paused column keeps its values claimed; the other column of the table is released.
$node->safe_psql('cell1', q{SELECT claims_cell.set_claiming('notes', 'tag', false)});
$node->safe_psql('cell1', q{TRUNCATE notes});
is(store_count('tn%') . ',' . store_count('tt%'), '0:0,5:5', 'a paused column is not released');
is($node->safe_psql('cell1', q{SELECT tgname FROM pg_trigger WHERE tgrelid = 'users'::regclass AND tgname LIKE '%truncate'}),
	'claims_cell_truncate', 'the trigger is the releasing one');

done_testing();
