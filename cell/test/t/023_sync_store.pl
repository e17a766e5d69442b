# The store in synchronous replication with its standby stalled: a
# claims_begin_update the cell gives up on is cancelled at the store, which
# ends that backend's wait for the standby ("already committed locally, but
# might not have been replicated"); the cell's second try repeats the lease
# uuid. An answer that came only after a try was given up is in doubt until
# a barrier at the store (a transaction writing WAL, which waits for the
# standby) shows it durable: with the standby stalled the INSERT must fail
# and leave no row (before, it committed, and a failover then lost its
# claim). A lease committed only after a given-up try keeps its local row
# for reconcile() to commit again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = PostgreSQL::Test::Cluster->new('store');
$store->init(allows_streaming => 1, extra => [ '--encoding=UTF8', '--locale=C' ]);
$store->append_conf('postgresql.conf', "shared_preload_libraries = 'claims'\n");
$store->start;
$store->safe_psql('postgres', q{
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
SELECT claims_register_cell(1, 'cell-one', 'cell_one');
});
$store->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($store, 'base', has_streaming => 1);
$standby->start;
$store->append_conf('postgresql.conf', "synchronous_standby_names = 'standby'\n");
$store->reload;
$store->poll_query_until('postgres',
	q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'})
  or BAIL_OUT('the standby did not become synchronous');

my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
claims_cell.breaker_threshold = 1000
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
my ($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (1, 'before')});
is($st, '00000', 'with the standby in sync a claim commits') or diag($err);

# A repair lease taken while the standby answers, committed after it stalls.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (2, 'repaired');
});
my $session = $node->background_psql('cell1', on_error_stop => 0);
$session->query_safe(q{BEGIN; SET LOCAL claims_cell.verify_recent = 0;
SELECT * FROM claims_cell.verify('users', repair => true)});

# The standby stalls: every commit at the store now waits for it.
$standby->stop;

($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (3, 'stalled')});
isnt($st, '00000', 'a claim whose answer came only after a given-up try fails') or diag($out);
is($st, '08006', 'as the store being unavailable (08006)');
note($err);
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE id = 3}), '0', 'no row is committed');

my $rows_before = $node->safe_psql('cell1', q{SELECT count(*) FROM claims_cell.outstanding_leases});
$session->query(q{COMMIT});
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE id = 2}), '1',
	'the repair transaction commits locally');
is($node->safe_psql('cell1', q{SELECT count(*) FROM claims_cell.outstanding_leases}), $rows_before + 1,
	'the lease committed after a given-up try keeps its local row for reconcile()');
$session->quit;

# The standby is back: reconcile() settles the leases, and only the
# committed rows' values are claimed.
$standby->start;
$store->poll_query_until('postgres',
	q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'})
  or BAIL_OUT('the standby did not become synchronous again');
$node->safe_psql('cell1', q{ALTER SYSTEM SET claims_cell.stale_after = 0; ALTER SYSTEM SET claims_cell.cleanup_after = 0});
$node->reload;
ok( $node->poll_query_until('cell1', q{
SELECT (SELECT count(*) FROM claims_cell.reconcile()) = 1
   AND NOT EXISTS (SELECT 1 FROM claims_cell.outstanding_leases WHERE NOT fence)}),
	'reconcile() settles every lease once the standby is back');
ok( $store->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM claim_leases WHERE state = 'outstanding'}),
	'nothing stays outstanding at the store');
is( $store->safe_psql('postgres',
		q{SELECT string_agg(bucket_value, ',' ORDER BY bucket_value) FROM claims WHERE status = 'ACTIVE'}),
	'before,repaired', 'the store holds exactly the committed rows\' values');
$standby->poll_query_until('postgres',
	q{SELECT count(*) = 2 FROM claims WHERE status = 'ACTIVE'});
is( $standby->safe_psql('postgres',
		q{SELECT string_agg(bucket_value, ',' ORDER BY bucket_value) FROM claims WHERE status = 'ACTIVE'}),
	'before,repaired', 'and so does the standby a failover would promote');

done_testing();
