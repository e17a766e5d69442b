# A DELETE of a row whose value the store never held (written with the
# triggers off), when the first try of its begin_update times out and the
# second try is refused with P0002. The first try may still run at the
# store, but it asks for the same release and is refused the same way: the
# cell must drop the release with the usual WARNING and go on, as it does
# when no try timed out, and roll the in-doubt lease back after COMMIT.
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
my $node = cell_node('cell', q{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1h'
claims_cell.verify_interval = 0
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SET session_replication_role = replica;
INSERT INTO users VALUES (1, 'ghost');
});

# The store's lease table is locked, so the first try waits and times out.
my $lock = start_session($store, 'postgres',
	"BEGIN;\nLOCK TABLE claim_leases IN ACCESS EXCLUSIVE MODE;\nSELECT 'locked';\n");
$lock->{h}->pump until $lock->{out} =~ /locked/;
my $t0 = $node->safe_psql('cell1', 'SELECT timeouts FROM claims_cell.stats');
# the lock goes as soon as the second try waits (within its 3 s, however
# loaded the machine): that one is refused like the first, which runs too
$lock->{in} .= wait_for_retry_sql('cell_one') . "COMMIT;\n\\q\n";
$lock->{h}->pump until $lock->{err} =~ /waiting for a retry/;
my $writer = start_session($node, 'cell1',
	"SET claims_cell.call_timeout = '3s';\nDELETE FROM users WHERE id = 1;\n\\q\n");
ok($node->poll_query_until('cell1', "SELECT timeouts > $t0 FROM claims_cell.stats"),
	'the first try times out');
$lock->{h}->finish;
unlike($lock->{err}, qr/ERROR/, 'the store session let go of the lock once the second try waited');
$writer->{h}->finish;
unlike($writer->{err}, qr/ERROR/, 'the DELETE succeeds after a timed-out first try')
  or diag($writer->{err});
like($writer->{err}, qr/WARNING:.*value "ghost" of column "username" of table "users" was not claimed at the claims store/,
	'with the WARNING for the value the store did not hold');
# the in-doubt lease of the two tries is rolled back after the COMMIT; the
# store does not know it, which proves nothing while the first try may run
like($writer->{err}, qr/WARNING:.*could not roll back lease \S+ at the claims store: lease \S+ does not exist/,
	'the COMMIT hands the in-doubt lease to the worker');
like($writer->{err}, qr/DETAIL:\s+The background worker rolls the lease back\./,
	'without saying that the committed transaction rolled back');
is($node->safe_psql('cell1', 'SELECT timeouts FROM claims_cell.stats'), $t0 + 1, 'one timeout counted');
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '0', 'the row is gone');

# The in-doubt lease is rolled back after the COMMIT: nothing stays outstanding.
ok( $store->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM claim_leases WHERE state = 'outstanding'}),
	'no lease stays outstanding at the store');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims}), '0', 'the store holds nothing');
ok( $node->poll_query_until('cell1', q{SELECT count(*) = 0 FROM claims_cell.outstanding_leases}),
	'and the cell keeps no lease row');
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0;
SELECT missing || ',' || extra || ',' || drifted FROM claims_cell.verify('users')}),
	'0,0,0', 'verify() finds the cell and the store in agreement');

$node->stop;
$store->stop;
done_testing();
