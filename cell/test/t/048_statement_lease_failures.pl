# Statement leases when the store fails: a savepoint that rolls back while
# the store is down, and a COMMIT that must supersede a statement's lease
# while the store is down, leave no lease lost and no value claimed:
# reconcile() rolls back what the store kept, and the store ends holding
# exactly what the cell committed.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cells', "claims_cell.call_timeout = 2s\nclaims_cell.connect_timeout = 2s\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

sub store_claims
{
	return $store->safe_psql('postgres',
		q{SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || subject_id, ',' ORDER BY bucket_value), '') FROM claims});
}

sub outstanding
{
	return $store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'});
}

# Reconcile until nothing is outstanding (bounded: 30 passes).
sub settle
{
	for my $i (1 .. 30)
	{
		$node->safe_psql('cell1',
			q{SET claims_cell.stale_after = 0; SELECT * FROM claims_cell.reconcile(full_scan => true)});
		return 1 if outstanding() eq '0';
		sleep 1;
	}
	return 0;
}

$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'kept')});

# 1. A savepoint rolls back while the store is down: its lease cannot be
# rolled back then; it is left to recovery, never committed.
my $s = start_session($node, 'cell1', "BEGIN;\nSAVEPOINT a;\nINSERT INTO users VALUES (2, 'sp_lost');\nSELECT 'leased';\n");
$s->{h}->pump until $s->{out} =~ /leased/;
is(store_claims(), 'kept:ACTIVE:1,sp_lost:LEASE_CREATING:2', 'the savepoint\'s statement leased its value');
$store->stop('fast');
$s->{in} .= "ROLLBACK TO SAVEPOINT a;\nINSERT INTO users VALUES (3, NULL);\nCOMMIT;\nSELECT 'committed';\n";
$s->{h}->pump until $s->{out} =~ /committed/;
like($s->{err}, qr/could not roll back lease/, 'the rollback at the store failed with a WARNING');
$s->{in} .= "\\q\n";
$s->{h}->finish;
is($node->safe_psql('cell1', 'SELECT count(*) FROM users WHERE id = 3'), '1',
	'the transaction went on and committed what claims nothing');
$store->start;
is(outstanding(), '1', 'the store still has the savepoint\'s lease');
ok(settle(), 'reconcile() rolls it back');
is(store_claims(), 'kept:ACTIVE:1', 'the value of the rolled back savepoint is not claimed');

# 2. A COMMIT that supersedes a statement lease while the store is down
# fails; nothing is kept, and the statement lease is rolled back by recovery.
$s = start_session($node, 'cell1', "BEGIN;\nINSERT INTO users VALUES (4, 'moved');\nDELETE FROM users WHERE id = 4;\nINSERT INTO users VALUES (5, 'moved');\nSELECT 'changed';\n");
$s->{h}->pump until $s->{out} =~ /changed/;
is(store_claims(), 'kept:ACTIVE:1,moved:LEASE_CREATING:4', 'the first statement\'s lease holds the value');
$store->stop('fast');
# (the session's psql stops at the error and exits)
$s->{in} .= "COMMIT;\n\\q\n";
$s->{h}->finish;
like($s->{err}, qr/ERROR:\s+08006/, 'the COMMIT fails with 08006');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'moved'}), '0', 'nothing is kept');
$store->start;
ok(settle(), 'reconcile() settles what the store kept');
is(store_claims(), 'kept:ACTIVE:1', 'the value is not claimed');
# (rows of committed leases wait for a later write or reconcile(); none of
# a lease that is not committed may stay)
my $rows = $node->safe_psql('cell1',
	q{SELECT coalesce(string_agg(quote_literal(uuid::text), ','), '''''') FROM claims_cell.outstanding_leases WHERE NOT fence});
is($store->safe_psql('postgres', "SELECT count(*) FROM claim_leases WHERE uuid::text IN ($rows) AND state <> 'committed'"),
	'0', 'no local row is left of a lease that is not committed');

# 3. The same transaction with the store up commits the final state once.
$node->safe_psql('cell1', q{BEGIN;
INSERT INTO users VALUES (4, 'moved');
DELETE FROM users WHERE id = 4;
INSERT INTO users VALUES (5, 'moved');
COMMIT;});
is(store_claims(), 'kept:ACTIVE:1,moved:ACTIVE:5', 'with the store up the final row holds the value');
is(outstanding(), '0', 'and nothing is outstanding');
$rows = $node->safe_psql('cell1',
	q{SELECT coalesce(string_agg(quote_literal(uuid::text), ','), '''''') FROM claims_cell.outstanding_leases WHERE NOT fence});
is($store->safe_psql('postgres', "SELECT count(*) FROM claim_leases WHERE uuid::text IN ($rows) AND state <> 'committed'"),
	'0', 'the superseded lease left no local row (reconcile() would try to commit it)');

done_testing();
