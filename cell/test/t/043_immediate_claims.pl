# Immediate and deferred claims with PostgreSQL's semantics: a claimed
# column is claimed at the end of each statement unless it is deferred
# (claim_column(..., "deferrable", initially_deferred) and
# claims_cell.set_constraints()); a savepoint rolled back rolls its leases
# back at the store, COMMIT commits them, a value leased by one statement
# and changed by a later one reaches the store once in its final state.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells', "max_prepared_transactions = 2\n");
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE UNIQUE INDEX ON users (username);
CREATE TABLE keys (id bigint PRIMARY KEY, fingerprint text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'id',
         "deferrable" => true, initially_deferred => true);
});
}

# A psql session that keeps its transaction open and goes on after errors
# (errors come in the same stream as the output, in order).
sub session
{
	my ($db) = @_;
	my %s = (in => '', out => '', n => 0);
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'VERBOSITY=verbose', '-h', $node->host,
			'-p', $node->port, '-d', $db ],
		'<', \$s{in}, '>', \$s{out}, '2>&1', IPC::Run::timeout(180));
	return \%s;
}

# Run sql in a session; returns (SQLSTATE of its error or '00000', output).
sub run
{
	my ($s, $sql) = @_;
	my $mark = 'done-' . ++$s->{n};
	$s->{out} = '';
	$sql .= ';' unless $sql =~ /(;|\\\.)\s*$/;
	$s->{in} .= "$sql\n\\echo $mark\n";
	$s->{h}->pump until $s->{out} =~ /^\Q$mark\E$/m;
	(my $out = $s->{out}) =~ s/^\Q$mark\E\n?//m;
	my $state = $out =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : '00000';
	chomp $out;
	return ($state, $out);
}

# "value:status" of the store's claims of the values like a pattern.
sub store_claims
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || creator_id || ':' || subject_id,
                           ',' ORDER BY bucket_value), '')
  FROM claims WHERE bucket_value LIKE '$like'});
}

sub outstanding
{
	return $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'});
}

sub begin_updates
{
	return $node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats');
}

is( $node->safe_psql('cell1',
		q{SELECT string_agg(column_name || ':' || "deferrable" || ':' || initially_deferred, ',' ORDER BY column_name)
		    FROM claims_cell.claimed_columns}),
	'fingerprint:true:true,username:false:false',
	'new declarations are immediate unless they say otherwise');
is((sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('keys', 'id', 'USERNAMES', 'USER', 'id', initially_deferred => true)}))[0],
	'22023', 'initially deferred without deferrable is refused');

$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken'); INSERT INTO keys VALUES (1, 'ktaken')});

# 1. The statement is leased at its end, in one call, and fails there.
my $s = session('cell1');
my $before = begin_updates();
run($s, 'BEGIN');
my ($st) = run($s, q{INSERT INTO users VALUES (10, 'im1'), (11, 'im2'), (12, 'im3')});
is($st, '00000', 'an immediate insert succeeds');
is(begin_updates() - $before, 1, 'one begin_update for the statement of three values');
is(store_claims('im%'), 'im1:LEASE_CREATING:1:10,im2:LEASE_CREATING:1:11,im3:LEASE_CREATING:1:12',
	'the values are leased at the end of the statement, before COMMIT');
is((sql_state($node, 'cell2', q{INSERT INTO users VALUES (20, 'im1')}))[0], '55P03',
	'another cell sees the value leased meanwhile');
($st) = run($s, q{INSERT INTO users VALUES (13, 'taken')});
is($st, '23505', 'a value another cell holds fails the statement with 23505');
run($s, 'ROLLBACK');
is(store_claims('im%'), '', 'ROLLBACK rolls the statement leases back at the store');
is(outstanding(), '0', 'no lease outstanding after the rollback');

# A statement of more records than claims_cell.max_batch_size takes one lease per batch.
$before = begin_updates();
$node->safe_psql('cell1', q{SET claims_cell.max_batch_size = 10;
BEGIN;
INSERT INTO users SELECT g, 'mb' || g FROM generate_series(200, 224) g;
SELECT claims_cell.set_constraints('IMMEDIATE');
COMMIT;});
is(begin_updates() - $before, 3, '25 values in one statement: three leases of at most 10');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'mb%' AND status = 'ACTIVE'}),
	'25', 'all committed');

# 2. A savepoint recovers from the failed statement; COMMIT commits the rest.
run($s, 'BEGIN');
run($s, q{INSERT INTO users VALUES (10, 'sp1')});
run($s, 'SAVEPOINT a');
($st) = run($s, q{INSERT INTO users VALUES (11, 'taken')});
is($st, '23505', 'in a savepoint: 23505 at the statement');
run($s, 'ROLLBACK TO SAVEPOINT a');
run($s, 'SAVEPOINT b');
run($s, q{INSERT INTO users VALUES (12, 'sp2')});
is(store_claims('sp2'), 'sp2:LEASE_CREATING:1:12', 'sp2 is leased in the savepoint');
run($s, 'ROLLBACK TO SAVEPOINT b');
is(store_claims('sp2'), '', 'rolling back the savepoint rolls its lease back at the store at once');
is((sql_state($node, 'cell2', q{INSERT INTO users VALUES (22, 'sp2')}))[0], '00000',
	'so another cell can take that value before this transaction ends');
($st) = run($s, 'COMMIT');
is($st, '00000', 'the transaction commits after recovering');
is(store_claims('sp%'), 'sp1:ACTIVE:1:10,sp2:ACTIVE:2:22', 'COMMIT commits the statement lease');
is(outstanding(), '0', 'nothing outstanding');

# 3. A value leased by one statement and changed by later ones.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (30, 'old1'), (31, 'old2')});
run($s, 'BEGIN');
run($s, q{INSERT INTO users VALUES (32, 'gone')});
run($s, q{DELETE FROM users WHERE id = 32});
run($s, q{DELETE FROM users WHERE id = 30});
($st) = run($s, q{INSERT INTO users VALUES (33, 'old1')});
is($st, '00000', 'a value released by an earlier statement can be taken again by a later one');
is((sql_state($node, 'cell2', q{INSERT INTO users VALUES (23, 'old1')}))[0], '55P03',
	'meanwhile it stays under this transaction\'s lease');
run($s, q{INSERT INTO users VALUES (34, 'mv')});
run($s, q{UPDATE users SET id = 35 WHERE id = 34});
run($s, 'SAVEPOINT d');
($st) = run($s, q{INSERT INTO keys VALUES (36, 'kmv')});
($st) = run($s, q{INSERT INTO users VALUES (36, 'mv')});
is($st, '23505', 'two rows of one value across statements fail the second statement');
run($s, 'ROLLBACK TO SAVEPOINT d');
($st) = run($s, 'COMMIT');
is($st, '00000', 'COMMIT succeeds');
is(store_claims('gone'), '', 'a value inserted and deleted in one transaction is not claimed');
is(store_claims('old1'), 'old1:ACTIVE:1:33', 'a value deleted and inserted again is held for its new row');
is(store_claims('mv'), 'mv:ACTIVE:1:35', 'a row whose key moved keeps its value, for its new subject');
is(outstanding(), '0', 'no lease outstanding: every superseded lease was rolled back');

# 4. Three statements swap two values (an ORM's swap through a third one).
$node->safe_psql('cell1', q{INSERT INTO users VALUES (40, 'swa'), (41, 'swb')});
$node->safe_psql('cell1', q{BEGIN;
UPDATE users SET username = 'swtmp' WHERE id = 40;
UPDATE users SET username = 'swa' WHERE id = 41;
UPDATE users SET username = 'swb' WHERE id = 40;
COMMIT;});
is(store_claims('sw%'), 'swa:ACTIVE:1:41,swb:ACTIVE:1:40', 'the swap reaches the store');
is(outstanding(), '0', 'nothing outstanding after the swap');

# 5. Deferred columns: the conflict comes at COMMIT, set_constraints switches.
run($s, 'BEGIN');
($st) = run($s, q{INSERT INTO keys VALUES (50, 'ktaken')});
is($st, '00000', 'a deferred column does not claim at the statement');
is(store_claims('ktaken'), 'ktaken:ACTIVE:2:1', 'nothing leased before COMMIT');
($st) = run($s, 'COMMIT');
is($st, '23505', 'the conflict fails the COMMIT');
run($s, 'BEGIN');
run($s, q{INSERT INTO keys VALUES (51, 'kd1')});
($st) = run($s, q{SELECT claims_cell.set_constraints('IMMEDIATE', 'keys', 'fingerprint')});
is($st, '00000', 'set_constraints IMMEDIATE');
is(store_claims('kd1'), 'kd1:LEASE_CREATING:1:51', 'switching to immediate claims what was deferred at once');
($st) = run($s, q{INSERT INTO keys VALUES (52, 'ktaken')});
is($st, '23505', 'and later statements claim at their end');
run($s, 'ROLLBACK');
($st) = run($s, q{SELECT claims_cell.set_constraints('DEFERRED', 'users', 'username')});
is($st, '42809', 'a column that is not deferrable cannot be deferred');
($st) = run($s, q{SELECT claims_cell.set_constraints('sometimes')});
is($st, '22023', 'an unknown mode is refused');
run($s, 'BEGIN');
run($s, q{SELECT claims_cell.set_constraints('DEFERRED')});
($st) = run($s, q{INSERT INTO users VALUES (54, 'taken')});
is($st, '23505', 'ALL DEFERRED leaves a column that is not deferrable immediate');
run($s, 'ROLLBACK');

# A deferrable column that is initially immediate, deferred for a bulk load.
$node->safe_psql('cell1', q{
SELECT claims_cell.claim_column('keys', 'id', 'PROJECT_IDS', 'USER', 'id', NULL, true, false)});
$before = begin_updates();
$node->safe_psql('cell1', q{BEGIN;
SELECT claims_cell.set_constraints('DEFERRED', 'keys');
INSERT INTO keys SELECT g, NULL FROM generate_series(1000, 1009) g;
INSERT INTO keys SELECT g, NULL FROM generate_series(1010, 1019) g;
COMMIT;});
is(begin_updates() - $before, 1, 'deferred: one lease at COMMIT for two statements');
$before = begin_updates();
$node->safe_psql('cell1', q{BEGIN;
INSERT INTO keys SELECT g, NULL FROM generate_series(1100, 1109) g;
INSERT INTO keys SELECT g, NULL FROM generate_series(1110, 1119) g;
COMMIT;});
is(begin_updates() - $before, 2, 'immediate: one lease per statement');
$node->safe_psql('cell1', q{SELECT claims_cell.unclaim_column('keys', 'id')});

# 6. A savepoint that rolls back a switch to immediate sends its changes back to COMMIT.
run($s, 'BEGIN');
run($s, q{INSERT INTO keys VALUES (60, 'kr1')});
run($s, 'SAVEPOINT c');
run($s, q{SELECT claims_cell.set_constraints('IMMEDIATE')});
is(store_claims('kr1'), 'kr1:LEASE_CREATING:1:60', 'leased by the switch');
run($s, 'ROLLBACK TO SAVEPOINT c');
is(store_claims('kr1'), '', 'the savepoint rolled that lease back');
($st) = run($s, 'COMMIT');
is($st, '00000', 'COMMIT');
is(store_claims('kr1'), 'kr1:ACTIVE:1:60', 'the change was claimed at COMMIT all the same');

# 7. PREPARE TRANSACTION after an immediate lease: refused, the lease rolled back.
run($s, 'BEGIN');
run($s, q{INSERT INTO users VALUES (70, 'prep')});
my $prep_out;
($st, $prep_out) = run($s, q{PREPARE TRANSACTION 'p1'});
is($st, '0A000', 'PREPARE TRANSACTION of a transaction with claims is refused');
like($prep_out, qr/cannot prepare a transaction that changed claimed values\n.*DETAIL:  Its leases are committed at the store at COMMIT/,
	'the refusal says its statement leases would stay outstanding, not that claims are taken at COMMIT');
is(store_claims('prep'), '', 'and its statement lease is rolled back');
is($node->safe_psql('cell1', 'SELECT count(*) FROM pg_prepared_xacts'), '0', 'nothing prepared');

# 8. REPEATABLE READ and SERIALIZABLE claim at the statement alike.
for my $level ('REPEATABLE READ', 'SERIALIZABLE')
{
	my $v = $level eq 'SERIALIZABLE' ? 'ser' : 'rr';
	run($s, "BEGIN ISOLATION LEVEL $level");
	run($s, qq{INSERT INTO users VALUES (80 + length('$v'), '$v')});
	is(store_claims($v), "$v:LEASE_CREATING:1:" . (80 + length($v)), "$level: leased at the statement");
	($st) = run($s, q{INSERT INTO users VALUES (90, 'taken')});
	is($st, '23505', "$level: 23505 at the statement");
	run($s, 'ROLLBACK');
	run($s, "BEGIN ISOLATION LEVEL $level");
	run($s, qq{INSERT INTO users VALUES (80 + length('$v'), '$v')});
	run($s, qq{DELETE FROM users WHERE id = 80 + length('$v')});
	run($s, qq{INSERT INTO users VALUES (85 + length('$v'), '$v')});
	($st) = run($s, 'COMMIT');
	is($st, '00000', "$level: COMMIT");
	is(store_claims($v), "$v:ACTIVE:1:" . (85 + length($v)), "$level: the final row holds the value");
}

# 9. Statements inside a PL/pgSQL exception block: the failed one is rolled back alone.
($st) = run($s, q{DO $$
BEGIN
  INSERT INTO users VALUES (100, 'blk1');
  BEGIN
    INSERT INTO users VALUES (101, 'taken');
  EXCEPTION WHEN unique_violation THEN
    INSERT INTO users VALUES (102, 'blk2');
  END;
END
$$});
is($st, '00000', 'an exception block catches 23505 of a claimed value');
is(store_claims('blk%'), 'blk1:ACTIVE:1:100,blk2:ACTIVE:1:102', 'the rest is claimed');

# 10. COPY and a cascade claim at the end of their statement too.
run($s, 'BEGIN');
($st) = run($s, qq{COPY users FROM STDIN;\n110\tcp1\n111\tcp2\n\\.});
is(store_claims('cp%'), 'cp1:LEASE_CREATING:1:110,cp2:LEASE_CREATING:1:111', 'COPY leases at its end');
run($s, 'COMMIT');
is(outstanding(), '0', 'nothing outstanding at the end');
# Rows of committed leases wait for the session's next write (no worker
# here); a row of a superseded or rolled back lease would be reconcile()'s
# to settle wrongly.
my $rows = $node->safe_psql('cell1',
	q{SELECT coalesce(string_agg(quote_literal(uuid::text), ','), '') FROM claims_cell.outstanding_leases});
is( $store->safe_psql('postgres',
		"SELECT count(*) FROM claim_leases WHERE uuid::text IN ($rows) AND state <> 'committed'"),
	'0', 'every local lease row left is of a committed lease')
	if $rows ne '';

$s->{in} .= "\\q\n";
$s->{h}->finish;
done_testing();
