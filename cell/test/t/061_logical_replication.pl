# Logical replication into a claimed table. A subscription's apply worker
# runs as session_replication_role = replica, so by default the claim
# triggers do not fire for it: applied rows are written unclaimed, as rows
# written with the triggers off, until verify() claims them (or another
# cell takes their values meanwhile). With the claim triggers ENABLE
# ALWAYS, applied rows are claimed and released at the apply transaction's
# commit (apply fires row triggers, not statement triggers), and a value
# another cell owns fails the apply transaction, which the subscription
# retries, as it would a local unique violation, until the value is free.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells', "wal_retrieve_retry_interval = '100ms'\n");
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}

# The publisher: a legacy database whose users move into cell 1.
my $legacy = PostgreSQL::Test::Cluster->new('legacy');
$legacy->init(allows_streaming => 'logical');
$legacy->start;
$legacy->safe_psql('postgres', q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
INSERT INTO users VALUES (1, 'old1'), (2, 'old2');
CREATE PUBLICATION pub FOR TABLE users;});
my $connstr = $legacy->connstr('postgres');

sub store_of
{
	my ($value) = @_;
	return $store->safe_psql('postgres',
		"SELECT coalesce((SELECT creator_id || ':' || status FROM claims WHERE bucket_value = '$value'), 'none')");
}

# The default: the subscription writes unclaimed rows.
$node->safe_psql('cell1', "CREATE SUBSCRIPTION sub CONNECTION \$\$$connstr\$\$ PUBLICATION pub");
$node->wait_for_subscription_sync($legacy, 'sub', 'cell1');
$legacy->safe_psql('postgres', q{INSERT INTO users VALUES (3, 'applied3')});
$legacy->wait_for_catchup('sub');
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '3', 'the subscription copied and applied three rows');
is(store_of('old1') . ' ' . store_of('applied3'), 'none none',
	'with the default triggers none of them is claimed');
is($node->safe_psql('cell1', q{SELECT missing FROM claims_cell.verify('users')}), '3',
	'verify() finds them missing');
is($node->safe_psql('cell1', q{SELECT repaired FROM claims_cell.verify('users', repair => true)}), '3',
	'and its repair claims them');
is(store_of('applied3'), '1:ACTIVE', 'for cell 1');

# ENABLE ALWAYS: the apply worker claims.
$node->safe_psql('cell1', q{
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT DISTINCT a.table_name, a.trigger_name FROM claims_cell.claimed_attributes a LOOP
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER %I', t.table_name, t.trigger_name);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER claims_cell_truncate', t.table_name);
        EXECUTE format('ALTER TABLE %s ENABLE ALWAYS TRIGGER claims_cell_statement', t.table_name);
    END LOOP;
END $$;});
$legacy->safe_psql('postgres', q{INSERT INTO users VALUES (4, 'applied4')});
$legacy->wait_for_catchup('sub');
is(store_of('applied4'), '1:ACTIVE', 'an applied INSERT is claimed for cell 1 at the apply commit');
$legacy->safe_psql('postgres', q{DELETE FROM users WHERE id = 3; UPDATE users SET username = 'renamed2' WHERE id = 2});
$legacy->wait_for_catchup('sub');
is(store_of('applied3'), 'none', 'an applied DELETE releases its value');
is(store_of('old2') . ' ' . store_of('renamed2'), 'none 1:ACTIVE', 'an applied rename moves the claim');

# A value another cell owns: the apply transaction fails and is retried.
$node->safe_psql('cell2', q{INSERT INTO users VALUES (50, 'contested')});
$legacy->safe_psql('postgres', q{INSERT INTO users VALUES (5, 'contested')});
my $offset = -s $node->logfile;
$node->wait_for_log(qr/already claimed by another cell/, $offset);
pass('the apply transaction fails on the value cell 2 owns');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'contested'}), '0',
	'and writes nothing');
is(store_of('contested'), '2:ACTIVE', 'cell 2 keeps it');
$node->safe_psql('cell2', q{DELETE FROM users WHERE id = 50});
ok($node->poll_query_until('cell1', q{SELECT count(*) = 1 FROM users WHERE username = 'contested'}),
	'once cell 2 released it, a retry of the subscription applies the row');
is(store_of('contested'), '1:ACTIVE', 'claimed for cell 1');

$node->safe_psql('cell1', 'DROP SUBSCRIPTION sub');
is($node->safe_psql('cell1', q{SELECT sum(missing + extra + drifted) FROM claims_cell.verify('users')}), '0',
	'verify() finds cell 1 and the store in agreement');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'nothing stays leased');

done_testing();
