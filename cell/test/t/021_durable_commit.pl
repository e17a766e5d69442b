# A transaction that took a lease flushes its commit record before the
# store is told to commit the lease, whatever synchronous_commit the session
# chose: a crash right after COMMIT returned must never leave the store
# holding a claim for a row the cell lost.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
# the WAL writer flushes an asynchronous commit only after 10 s
my $node = cell_node('cell', qq{
wal_writer_delay = 10000
autovacuum = off
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE notes (id bigint PRIMARY KEY, body text);
});

for my $setting ('off', 'local')
{
	my ($st, $out, $err) = sql_state($node, 'cell1', qq{
SET synchronous_commit = $setting;
INSERT INTO users VALUES (1, 'durable-$setting');
});
	is($st, '00000', "a claiming INSERT with synchronous_commit = $setting commits") or diag($err);
	is($store->safe_psql('postgres',
		qq{SELECT status FROM claims WHERE bucket_value = 'durable-$setting'}),
		'ACTIVE', 'the store holds the claim');
	$node->stop('immediate');
	$node->start;
	is($node->safe_psql('cell1', qq{SELECT count(*) FROM users WHERE username = 'durable-$setting'}),
		'1', "after a crash the row of the claim is still there (synchronous_commit = $setting)");
	$node->safe_psql('cell1', 'DELETE FROM users');
}

# A transaction without claims keeps the session's choice (nothing forced).
$node->safe_psql('cell1', q{SET synchronous_commit = off; INSERT INTO notes VALUES (1, 'async')});
$node->stop('immediate');
$node->start;
is($node->safe_psql('cell1', q{SELECT count(*) FROM notes}), '0',
	'a transaction with no claim still commits asynchronously (the crash lost it)');

done_testing();
