# Two cells claim usernames at one store through plain SQL: a race for one
# value, renames, deletes, savepoints, cascades, bulk inserts, PREPARE,
# a store that goes down, a begin_update retried after a timeout (the
# columns are claimed at COMMIT, deferred). After
# each step the cells' tables and the store agree value by value.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

# The store: claims preloaded, one login role per cell.
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);

# The cells: one server, two databases, each its own cell.
# The breaker opens after 3 failures and, with early probes off, stays open
# for the whole cooldown: 10 min, so that no load on the machine lets it
# half-open between the statements that check it is open (a cooldown that
# runs out is tested with a short one at the end).
my $node = cell_node('cells', qq{max_prepared_transactions = 2
claims_cell.breaker_threshold = 3
claims_cell.breaker_cooldown = '10min'
claims_cell.breaker_probe_interval = 0
});

my %cell_db = (1 => 'cell1', 2 => 'cell2');
my %cell_role = (1 => 'cell_one', 2 => 'cell_two');
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => $cell_db{$cell}, cell_id => $cell,
		role => $cell_role{$cell}, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, name text);
CREATE TABLE keys (id bigint PRIMARY KEY, user_id bigint REFERENCES users ON DELETE CASCADE,
                   fingerprint text);
CREATE TABLE notes (id bigint PRIMARY KEY, body text);
SELECT claims_cell.claim_column('public.users', 'username',
         bucket_type => 'USERNAMES', subject_type => 'USER', subject_column => 'id',
         source_type => 'RAILS_TABLE_USERS', "deferrable" => true, initially_deferred => true);
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'user_id',
         'RAILS_TABLE_KEYS', true, true);
});
}

# Run SQL in a cell; returns (SQLSTATE or '00000', stdout, stderr).
sub cell_sql
{
	my ($cell, $sql) = @_;
	return sql_state($node, $cell_db{$cell}, $sql);
}

# Set a claims_cell setting on the cell server and wait until a new session
# sees it (pg_reload_conf() only signals, the postmaster reloads later);
# value is spelled as SHOW prints it.
sub set_cell_conf
{
	my ($name, $value) = @_;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $name = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	$node->poll_query_until('cell1', "SELECT current_setting('$name') = '$value'")
	  or die "$name = '$value' was not applied";
	return;
}

# The SQLSTATE of SQL run in a cell.
sub state_of { my @r = cell_sql(@_); return $r[0]; }

# A cell's claimable values, "bucket:value:subject", sorted.
sub local_values
{
	my ($cell) = @_;
	return $node->safe_psql($cell_db{$cell}, q{
SELECT string_agg(v, ',' ORDER BY v) FROM (
  SELECT 'USERNAMES:' || username || ':' || id AS v FROM users WHERE btrim(coalesce(username, '')) <> ''
  UNION ALL
  SELECT 'SSH_KEY_FINGERPRINTS:' || fingerprint || ':' || user_id FROM keys
   WHERE btrim(coalesce(fingerprint, '')) <> '') s});
}

# The store's claims of a cell in the same form.
sub store_values
{
	my ($cell) = @_;
	return $store->safe_psql('postgres', qq{
SELECT string_agg(v, ',' ORDER BY v) FROM (
  SELECT t.name || ':' || c.bucket_value || ':' || c.subject_id AS v
    FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
   WHERE c.creator_id = $cell) s});
}

# After a step: both cells and the store agree, nothing is left unsettled.
sub agree
{
	my ($step) = @_;
	for my $cell (1, 2)
	{
		is(store_values($cell), local_values($cell), "$step: cell $cell and the store agree");
	}
	is( $store->safe_psql('postgres',
			q{SELECT (SELECT count(*) FROM claims WHERE status <> 'ACTIVE')
			   + (SELECT count(*) FROM claim_leases WHERE state = 'outstanding')}),
		'0', "$step: no lease outstanding at the store");
}

# Vertical slice: an INSERT claims, the COMMIT sends, the store commits.
is(state_of(1, q{INSERT INTO users VALUES (1, 'alice', 'Alice')}), '00000',
	'cell 1 claims alice with a plain INSERT');
is(store_values(1), 'USERNAMES:alice:1', 'the store holds alice for cell 1');
my ($st, $out, $err) = cell_sql(2, q{INSERT INTO users VALUES (7, 'alice', 'Other Alice')});
is($st, '23505', 'cell 2 cannot take alice: 23505');
like($err, qr/value "alice" of column "username" of table "users" is already claimed/,
	'the message names the value, the column and the table');
like($err, qr/DETAIL:\s+Key \(username\)=\(alice\) already exists in another cell/,
	'the detail reads like a unique violation');
is($node->safe_psql('cell2', 'SELECT count(*) FROM users'), '0', 'cell 2 keeps nothing');
agree('first claim');

# A transaction that claims nothing never calls the store.
my $calls = $node->safe_psql('cell1', 'SELECT calls FROM claims_cell.stats');
$node->safe_psql('cell1', q{INSERT INTO notes VALUES (1, 'x'); UPDATE users SET name = 'A' WHERE id = 1});
is($node->safe_psql('cell1', 'SELECT calls FROM claims_cell.stats'), $calls,
	'no store call without a claimed change');

# The row of a committed lease is deleted by the session's next write.
my $rows = $node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases');
$node->safe_psql('cell1', q{INSERT INTO users VALUES (40, 'zed', 'Z'); INSERT INTO notes VALUES (3, 'y')});
is($node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases'), $rows,
	'the lease row of a committed lease is gone after the next write');

# Two open transactions race for one username: the first COMMIT wins.
my ($in1, $out1, $err1, $in2, $out2, $err2) = ('', '', '', '', '', '');
my @psql = ('psql', '-X', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-h', $node->host,
	'-p', $node->port);
my $h1 = IPC::Run::start([ @psql, '-d', 'cell1' ], '<', \$in1, '>', \$out1, '2>', \$err1);
my $h2 = IPC::Run::start([ @psql, '-d', 'cell2' ], '<', \$in2, '>', \$out2, '2>', \$err2);
$in1 .= "BEGIN;\nINSERT INTO users VALUES (2, 'bob', 'Bob 1');\nSELECT 'inserted';\n";
$in2 .= "BEGIN;\nINSERT INTO users VALUES (2, 'bob', 'Bob 2');\nSELECT 'inserted';\n";
$h1->pump until $out1 =~ /inserted/;
$h2->pump until $out2 =~ /inserted/;
$in1 .= "COMMIT;\n\\q\n";
$h1->finish;
$in2 .= "COMMIT;\n\\q\n";
$h2->finish;
like($err2, qr/ERROR:\s+23505/, 'the second COMMIT fails with 23505');
is($err1, '', 'the first COMMIT succeeds');
is($node->safe_psql('cell2', q{SELECT count(*) FROM users WHERE username = 'bob'}), '0',
	'the loser keeps nothing');
agree('race');

# Both at once: exactly one wins, the other fails with 23505 or 55P03.
my @h;
my @errs = ('', '');
for my $i (0, 1)
{
	push @h, IPC::Run::start([ @psql, '-d', $cell_db{ $i + 1 }, '-c',
		"INSERT INTO users VALUES (3, 'carol', 'Carol')" ], '>', \my $o, '2>', \$errs[$i]);
}
$_->finish for @h;
my $winners = grep { $_ eq '' } @errs;
is($winners, 1, 'concurrent commits: exactly one wins');
like(join('', @errs), qr/ERROR:\s+(23505|55P03)/, 'the other is a conflict');
agree('concurrent race');

# Rename: the old value is released, the new one claimed.
is(state_of(1, q{UPDATE users SET username = 'alicia' WHERE id = 1}), '00000', 'rename');
is(state_of(2, q{INSERT INTO users VALUES (8, 'alice', 'Alice 2')}), '00000',
	'the old name is free for the other cell');
agree('rename');

# A new subject for the same value is a replace at the store.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (9, NULL, 'x')});
is(state_of(1, q{INSERT INTO keys VALUES (1, 1, 'SHA256:aaa')}), '00000', 'a key is claimed');
is(state_of(1, q{UPDATE keys SET user_id = 9 WHERE id = 1}), '00000', 'its subject changes');
agree('replace');

# Delete releases.
is(state_of(2, q{DELETE FROM users WHERE id = 8}), '00000', 'delete');
agree('delete');

# Savepoints: a rolled back savepoint claims nothing, a released one does.
is( state_of(1, q{BEGIN; SAVEPOINT a; INSERT INTO users VALUES (10, 'dave', 'D');
	ROLLBACK TO SAVEPOINT a; SAVEPOINT b; INSERT INTO users VALUES (11, 'erin', 'E');
	RELEASE SAVEPOINT b; COMMIT;}), '00000', 'savepoints');
is(state_of(2, q{INSERT INTO users VALUES (10, 'dave', 'D')}), '00000',
	'a value of a rolled back savepoint was never claimed');
agree('savepoints');

# A cascaded delete releases the keys of the user.
$node->safe_psql('cell1', q{INSERT INTO keys VALUES (2, 11, 'SHA256:bbb'), (3, 11, 'SHA256:ccc')});
is(state_of(1, q{DELETE FROM users WHERE id = 11}), '00000', 'cascade');
agree('cascade');

# INSERT ... SELECT of 1000 rows: one lease for all.
my $begins = $node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats');
is( state_of(1, q{INSERT INTO users SELECT 1000 + i, 'bulk' || i, NULL FROM generate_series(1, 1000) i}),
	'00000', 'INSERT ... SELECT of 1000 rows');
is($node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats'), $begins + 1,
	'one begin_update for the statement');
agree('bulk insert');
is(state_of(2, q{INSERT INTO users SELECT 5000 + i, 'bulk' || i, NULL FROM generate_series(999, 1000) i}),
	'23505', 'a bulk insert meeting one taken value fails whole');
agree('bulk conflict');

# PREPARE TRANSACTION with claims is refused; the transaction is gone.
is(state_of(1, q{BEGIN; INSERT INTO users VALUES (20, 'frank', 'F'); PREPARE TRANSACTION 'x';}),
	'0A000', 'PREPARE TRANSACTION with claims: 0A000');
is($node->safe_psql('cell1', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing prepared');
agree('prepare');

# A begin_update that times out is retried with the same lease.
my ($lin, $lout, $lerr) = ('', '', '');
my $lock = IPC::Run::start(
	[ 'psql', '-X', '-h', $store->host, '-p', $store->port, '-d', 'postgres' ],
	'<', \$lin, '>', \$lout, '2>', \$lerr);
$lin .= "BEGIN;\nLOCK TABLE claim_leases IN ACCESS EXCLUSIVE MODE;\nSELECT 'locked';\n";
$lock->pump until $lout =~ /locked/;
my $t0 = $node->safe_psql('cell1', 'SELECT timeouts FROM claims_cell.stats');
# Each try waits up to 2 s: the lock goes once the first try has timed
# out, let go by the store session itself as soon as the second try waits.
$lin .= wait_for_retry_sql('cell_one') . "COMMIT;\n\\q\n";
$lock->pump until $lerr =~ /waiting for a retry/;
my $writer = IPC::Run::start([ @psql, '-d', 'cell1', '-c', "SET claims_cell.call_timeout = '2s'", '-c',
	"INSERT INTO users VALUES (21, 'gina', 'G')" ], '>', \my $wout, '2>', \my $werr);
$lock->finish;
$writer->finish;
unlike($lerr, qr/ERROR/, 'the store session let go of the lock once the second try waited');
is($werr, '', 'the commit succeeds after a timed-out first try');
is($node->safe_psql('cell1', 'SELECT timeouts FROM claims_cell.stats'), $t0 + 1, 'one timeout counted');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases l WHERE l.creator_id = 1
	 AND l.payload::text LIKE '%gina%'}), '1', 'one lease for both tries');
agree('retry after timeout');

# The store goes down: 08006 at once, unclaimed writes unaffected.
$store->stop;
($st, $out, $err) = cell_sql(1, q{INSERT INTO users VALUES (30, 'harry', 'H')});
is($st, '08006', 'store down: 08006');
like($err, qr/HINT:\s+Nothing was claimed/, 'with a hint');
cell_sql(1, q{INSERT INTO users VALUES (30, 'harry', 'H')}) for 1 .. 2;
my $before = $node->safe_psql('cell1', 'SELECT calls || \' \' || breaker_rejections FROM claims_cell.stats');
($st, $out, $err) = cell_sql(1, q{INSERT INTO users VALUES (30, 'harry', 'H')});
my ($calls, $rejections) = split / /, $before;
is($st, '08006', 'breaker open: 08006');
like($err, qr/circuit breaker is open/, 'the breaker answers');
is($node->safe_psql('cell1', 'SELECT calls || \' \' || breaker_rejections FROM claims_cell.stats'),
	$calls . ' ' . ($rejections + 1), 'at once: no try of the store, one rejection counted');
is($node->safe_psql('cell1', q{SELECT breaker_state FROM claims_cell.stats}), 'open', 'stats show it');
is(state_of(1, q{INSERT INTO notes VALUES (2, 'still writable'); UPDATE users SET name = 'x' WHERE id = 1}),
	'00000', 'unclaimed writes go on');
$store->start;
# early probes on: the breaker opened with the probe due at once, so it
# half-opens as soon as a backend sees the setting
set_cell_conf('claims_cell.breaker_probe_interval', '200ms');
ok($node->poll_query_until('cell1', q{SELECT breaker_state = 'half-open' FROM claims_cell.stats}),
	'the breaker half-opens once early probes are on');
is(state_of(1, q{INSERT INTO users VALUES (30, 'harry', 'H')}), '00000', 'the probe succeeds');
is($node->safe_psql('cell1', q{SELECT breaker_state FROM claims_cell.stats}), 'closed', 'the breaker closes');
agree('store down and back');

# A cooldown that runs out: with a short one and no early probes the
# breaker half-opens on its own, and the probe closes it. Waiting for the
# half-open state, not sleeping, makes this hold however slow the machine.
set_cell_conf('claims_cell.breaker_probe_interval', '0');
set_cell_conf('claims_cell.breaker_cooldown', '1500ms');
$store->stop;
cell_sql(1, q{INSERT INTO users VALUES (31, 'irene', 'I')}) for 1 .. 3;
$store->start;
ok($node->poll_query_until('cell1', q{SELECT breaker_state = 'half-open' FROM claims_cell.stats}),
	'the breaker opened and half-opens after the 1500 ms cooldown');
is(state_of(1, q{INSERT INTO users VALUES (31, 'irene', 'I')}), '00000', 'the probe succeeds after the cooldown');
is($node->safe_psql('cell1', q{SELECT breaker_state FROM claims_cell.stats}), 'closed',
	'the breaker closes again');
agree('cooldown run out');

$node->stop;
$store->stop;
done_testing();
