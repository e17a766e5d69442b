# Partitioned tables and primary keys of several columns. claim_column on
# a partitioned table claims through it: its row trigger is cloned to every
# partition (present, created or attached later), and every partition gets
# its statement and TRUNCATE triggers, so a value another cell owns fails
# at the statement whether the statement names the parent or a partition,
# and a row moved to another partition with a new value leases at the
# statement. ATTACH of a table holding rows makes them holders at once and
# verify() claims them; DETACH is unclaim_column for that partition. The
# source id of a key of several columns sorts in key order (verify's
# ranges), integers by value across signs.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
# the cell registers the source types of its tables itself
$store->safe_psql('postgres', q{GRANT SELECT, INSERT ON claim_source_types TO cell_one});
my $node = cell_node('cells');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE accounts (id bigint, region text, username text, PRIMARY KEY (region, id))
  PARTITION BY LIST (region);
CREATE TABLE accounts_eu PARTITION OF accounts FOR VALUES IN ('eu');
-- another column layout: a dropped column shifts the attribute numbers
CREATE TABLE accounts_us (junk int, id bigint NOT NULL, region text NOT NULL, username text);
ALTER TABLE accounts_us DROP COLUMN junk;
ALTER TABLE accounts ATTACH PARTITION accounts_us FOR VALUES IN ('us');
});
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users VALUES (1, 'taken'), (2, 'taken2'), (3, 'taken3');
});

# "value:status:cell:source id (hex)" of the store's claims of values like a pattern.
sub store_claims
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || creator_id || ':' || encode(source_id, 'hex'),
                           ',' ORDER BY bucket_value), '')
  FROM claims WHERE bucket_value LIKE '$like'});
}

sub outstanding
{
	return $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'});
}

# The declaration.
my ($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('accounts', 'username', 'USERNAMES', 'USER', 'id')});
is($st, '00000', 'claim_column accepts a partitioned table') or diag($err);
is($node->safe_psql('cell1', q{SELECT source_columns FROM claims_cell.claimed_columns WHERE table_name = 'accounts'::regclass}),
	'{region,id}', 'its source key is its primary key, in key order');
is( $node->safe_psql('cell1', q{
SELECT string_agg(c.relname || ':' || (SELECT string_agg(t.tgname, ',' ORDER BY t.tgname) FROM pg_trigger t WHERE t.tgrelid = c.oid), ' ' ORDER BY c.relname)
  FROM pg_class c WHERE c.relname LIKE 'accounts%' AND c.relkind IN ('r', 'p')}),
	'accounts:claims_cell_statement,claims_cell_truncate,claims_cell_username'
	  . ' accounts_eu:claims_cell_statement,claims_cell_truncate,claims_cell_username'
	  . ' accounts_us:claims_cell_statement,claims_cell_truncate,claims_cell_username',
	'the row trigger is cloned to each partition, and each has its statement and TRUNCATE triggers');

# At the statement, naming the parent or a partition.
($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN;
INSERT INTO accounts VALUES (1, 'eu', 'taken');
SELECT 'after the insert';
COMMIT;});
is($st, '23505', 'an INSERT through the parent of a value cell 2 owns fails');
unlike($out, qr/after the insert/, 'at the statement, not at COMMIT');
like($err, qr/table "accounts"/, 'naming the declared table');
($st, $out) = sql_state($node, 'cell1', q{BEGIN;
INSERT INTO accounts_us VALUES (1, 'us', 'taken');
SELECT 'after the insert';
COMMIT;});
is($st, '23505', 'an INSERT naming a partition fails');
unlike($out, qr/after the insert/, 'at the statement too');

$node->safe_psql('cell1', q{INSERT INTO accounts VALUES (1, 'eu', 'pa-one'), (-5, 'us', 'pa-two')});
is(store_claims('pa-%'),
	'pa-one:ACTIVE:1:6575008000000000000001,pa-two:ACTIVE:1:7573007ffffffffffffffb',
	'free values are claimed with source ids of both key columns (a partition of another layout too)');

# A row moved to another partition under a new value: leased at the statement.
($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN;
UPDATE accounts SET region = 'us', username = 'taken' WHERE id = 1;
SELECT 'after the update';
COMMIT;});
is($st, '23505', 'a move between partitions to a value cell 2 owns fails');
unlike($out, qr/after the update/, 'at the statement');
my $s = start_session($node, 'cell1', q{BEGIN;
UPDATE accounts SET region = 'us', username = 'pa-moved' WHERE id = 1;
SELECT 'moved';
});
$s->{h}->pump until $s->{out} =~ /moved/ || $s->{err} =~ /ERROR/;
is($s->{err}, '', 'a move between partitions to a free value succeeds');
is(outstanding(), '1', 'its lease was taken at the statement');
$s->{in} .= "COMMIT;\n";
$s->{h}->finish;
is(store_claims('pa-%'),
	'pa-moved:ACTIVE:1:7573008000000000000001,pa-two:ACTIVE:1:7573007ffffffffffffffb',
	'after COMMIT the moved row holds its new value under its new source id, the old value is released');

# Partitions made later get their triggers.
$node->safe_psql('cell1', q{CREATE TABLE accounts_asia PARTITION OF accounts FOR VALUES IN ('asia')});
($st, $out) = sql_state($node, 'cell1', q{BEGIN;
INSERT INTO accounts_asia VALUES (7, 'asia', 'taken');
SELECT 'after the insert';
COMMIT;});
is($st, '23505', 'a partition created later claims at the statement');
unlike($out, qr/after the insert/, 'its statement trigger was made');

# ATTACH of a table holding rows: holders at once, claimed by verify().
$node->safe_psql('cell1', q{INSERT INTO users VALUES (50, 'pa-shared')});
$node->safe_psql('cell1', q{
CREATE TABLE accounts_af (id bigint NOT NULL, region text NOT NULL, username text);
INSERT INTO accounts_af VALUES (1, 'af', 'pa-shared'), (2, 'af', 'pa-africa');
ALTER TABLE accounts ATTACH PARTITION accounts_af FOR VALUES IN ('af');
DELETE FROM users WHERE id = 50;});
is(store_claims('pa-shared'), 'pa-shared:ACTIVE:1:6166008000000000000001',
	'a value an attached row holds is not released with another table\'s row: it names the attached row');
is(store_claims('pa-africa'), '', 'the attached rows are not claimed yet');
is($node->safe_psql('cell1', q{SELECT missing FROM claims_cell.verify('accounts', true)}), '1',
	'verify() finds the attached row missing');
is(store_claims('pa-africa'), 'pa-africa:ACTIVE:1:6166008000000000000002', 'and claims it');
($st) = sql_state($node, 'cell1', q{INSERT INTO accounts_af VALUES (3, 'af', 'taken')});
is($st, '23505', 'the attached partition claims at the statement');

# TRUNCATE of a partition and of the parent.
$node->safe_psql('cell1', q{TRUNCATE accounts_af});
is(store_claims('pa-africa') . store_claims('pa-shared'), '', 'TRUNCATE of a partition releases its values');
is(store_claims('pa-two'), 'pa-two:ACTIVE:1:7573007ffffffffffffffb', 'and only its values');

# A partition's column cannot be claimed twice.
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('accounts_eu', 'username', 'USERNAMES', 'USER', 'id')});
is($st, '42710', 'a partition of a claimed table cannot claim the column again');
like($err, qr/already claimed through partitioned table "accounts"/, 'and says through which');
$node->safe_psql('cell1', q{
CREATE TABLE things (id bigint, kind text, name text, PRIMARY KEY (kind, id)) PARTITION BY LIST (kind);
CREATE TABLE things_a PARTITION OF things FOR VALUES IN ('a');
SELECT claims_cell.claim_column('things_a', 'name', 'USERNAMES', 'USER', 'id');});
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('things', 'name', 'USERNAMES', 'USER', 'id')});
is($st, '42710', 'a partitioned table whose partition claims the column cannot claim it');
is($node->safe_psql('cell1', q{SELECT count(*) FROM claims_cell.claimed_attributes WHERE table_name = 'things'::regclass}),
	'0', 'nothing is declared');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_source_types WHERE name = 'RAILS_TABLE_THINGS'}),
	'0', 'and nothing is registered at the store: the refusal comes first');
($st, $out, $err) = sql_state($node, 'cell1',
	q{BEGIN; SELECT claims_cell.set_constraints('deferred', 'accounts_eu', 'username'); COMMIT;});
is($st, '42809', 'set_constraints naming a partition of a claimed table is refused');
like($err, qr/Name table "accounts" in claims_cell.set_constraints/, 'pointing at the declared table');
$node->safe_psql('cell1', q{INSERT INTO things VALUES (1, 'a', 'pa-thing')});
is(store_claims('pa-thing'), 'pa-thing:ACTIVE:1:61008000000000000001',
	'a declaration made on a single partition keeps working (at COMMIT)');
$node->safe_psql('cell1', q{CREATE TABLE things_b (id bigint, kind text, name text, PRIMARY KEY (kind, id));
SELECT claims_cell.claim_column('things_b', 'name', 'USERNAMES', 'USER', 'id');});
$node->safe_psql('cell1', q{ALTER TABLE things ATTACH PARTITION things_b FOR VALUES IN ('b')});
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_inherits WHERE inhrelid = 'things_b'::regclass}), '1',
	'an unclaimed parent takes a claimed partition');

# Pausing, DETACH and unclaim_column act on every partition.
$node->safe_psql('cell1', q{SELECT claims_cell.set_claiming('accounts', 'username', false)});
$node->safe_psql('cell1', q{INSERT INTO accounts_eu VALUES (20, 'eu', 'pa-paused')});
is(store_claims('pa-paused'), '', 'a paused partitioned column claims nothing in its partitions');
$node->safe_psql('cell1', q{DELETE FROM accounts WHERE id = 20; SELECT claims_cell.set_claiming('accounts', 'username', true)});
$node->safe_psql('cell1', q{ALTER TABLE accounts DETACH PARTITION accounts_us});
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'accounts_us'::regclass}), '0',
	'a detached partition has no claim trigger left');
($st) = sql_state($node, 'cell1', q{INSERT INTO accounts_us VALUES (9, 'us', 'taken3')});
is($st, '00000', 'and claims nothing, as after unclaim_column');
is(store_claims('pa-two'), 'pa-two:ACTIVE:1:7573007ffffffffffffffb', 'its values stay claimed at the store');
$node->safe_psql('cell1', q{INSERT INTO accounts VALUES (30, 'eu', 'pa-eu'), (31, 'asia', 'pa-asia')});
$node->safe_psql('cell1', q{TRUNCATE accounts});
is(store_claims('pa-eu') . store_claims('pa-asia'), '', 'TRUNCATE of the parent releases its partitions\' values');
$node->safe_psql('cell1', q{SELECT claims_cell.unclaim_column('accounts', 'username')});
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
  WHERE c.relname LIKE 'accounts%' AND t.tgname LIKE 'claims_cell%'}), '0',
	'unclaim_column takes the triggers from every partition');

# A plain table whose primary key has two columns: verify's ranges walk it
# in key order across batches, integers of both signs, texts by bytes.
$node->safe_psql('cell1', q{
CREATE TABLE handles (org bigint, slug text, handle text, owner_id bigint NOT NULL DEFAULT 1,
                      PRIMARY KEY (org, slug));
SELECT claims_cell.claim_column('handles', 'handle', 'USERNAMES', 'USER', 'owner_id');
SET session_replication_role = replica;
INSERT INTO handles (org, slug, handle)
  SELECT (i % 7) - 3, 's' || (i / 7) || CASE WHEN i % 2 = 0 THEN 'é' ELSE '' END, 'h-' || i
    FROM generate_series(1, 2500) i;});
is($node->safe_psql('cell1', q{SELECT missing FROM claims_cell.verify('handles', true)}), '2500',
	'verify() finds every row of a two-column key written without the triggers');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'h-%' AND status = 'ACTIVE' AND creator_id = 1}),
	'2500', 'and claims each once');
is($node->safe_psql('cell1', q{SELECT missing + extra + drifted FROM claims_cell.verify('handles', true)}), '0',
	'a second run finds nothing to repair');
is( $store->safe_psql('postgres', q{SELECT encode(source_id, 'hex') FROM claims WHERE bucket_value = 'h-3'}),
	$node->safe_psql('cell1', q{SELECT encode(int8send(0 # (-9223372036854775807 - 1)) || convert_to('s0', 'UTF8') || '\x00'::bytea, 'hex')}),
	'the source id is each key column in order, the integer with its sign bit flipped, the text ended by a 0 byte');
($st) = sql_state($node, 'cell2', q{INSERT INTO users VALUES (10, 'h-17')});
is($st, '23505', 'another cell cannot take a value of a two-column key');
$node->safe_psql('cell1', q{UPDATE handles SET handle = 'h-renamed' WHERE handle = 'h-17'});
is(store_claims('h-renamed') =~ /^h-renamed:ACTIVE:1:/ ? 1 : 0, 1, 'a rename is claimed');
is(store_claims('h-17'), '', 'and the old value released');
is(outstanding(), '0', 'no lease is left');

done_testing();
