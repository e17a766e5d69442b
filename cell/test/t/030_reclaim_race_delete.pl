# reconcile() claims a lost value again for the row holding it, and holds
# that row (FOR SHARE) until the claim is committed: a writer deleting the
# row meanwhile waits, then releases the claim. No claim is left for a row
# that no longer exists.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
claims_cell.cleanup_after = 0
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE emails (id bigint PRIMARY KEY, email text);
SELECT claims_cell.claim_column('emails', 'email', 'EMAILS', 'USER', 'id');
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

$node->safe_psql('cell1', q{INSERT INTO emails VALUES (1, 'a@example.com')});
$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'bob')});

# the store loses both leases and their claims (an asynchronous failover)
$store->safe_psql('postgres', q{
SET session_replication_role = replica;
DELETE FROM claims WHERE creator_id = 1;
DELETE FROM claim_leases WHERE creator_id = 1;
});

# hold the second bucket type's table so that the pass stops between the
# holder scan of EMAILS=a@example.com and its repair lease
my $lock = start_session($node, 'cell1', "BEGIN;\nLOCK TABLE users IN ACCESS EXCLUSIVE MODE;\nSELECT 'locked';\n");
$lock->{h}->pump until $lock->{out} =~ /locked/;
my $rec = start_session($node, 'cell1', "SELECT * FROM claims_cell.reconcile();\n");
ok( $node->poll_query_until('cell1', q{
SELECT count(*) = 1 FROM pg_locks WHERE relation = 'users'::regclass AND NOT granted}),
	'the pass scanned the emails and waits to scan users');

# A writer deletes the row holding the lost value meanwhile: the pass holds
# the row (FOR SHARE) until its claim is committed, so the writer waits and
# then releases that claim.
my $writer = start_session($node, 'cell1', "DELETE FROM emails WHERE id = 1;\nSELECT 'deleted';\n");
ok( $node->poll_query_until('cell1', q{
SELECT count(*) >= 1 FROM pg_stat_activity WHERE query LIKE 'DELETE FROM emails%' AND wait_event_type = 'Lock'}),
	'the writer waits for the pass, which holds the row');

$lock->{in} .= "COMMIT;\n\\q\n";
$lock->{h}->finish;
$rec->{h}->finish;
note("reconcile: $rec->{out} $rec->{err}");
$writer->{in} .= "\\q\n";
$writer->{h}->finish;
like($writer->{out}, qr/deleted/, 'the writer\'s DELETE commits after the pass') or diag($writer->{err});

is($node->safe_psql('cell1', q{SELECT count(*) FROM emails WHERE email = 'a@example.com'}),
	'0', 'no row holds a@example.com');
is( $store->safe_psql('postgres',
		q{SELECT count(*) FROM claims WHERE bucket_value = 'a@example.com' AND status = 'ACTIVE'}),
	'0', 'so the store must not hold a claim of a@example.com for the cell');

$node->stop;
$store->stop;
done_testing();
