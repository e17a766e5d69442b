# One claim stands for one row: two rows of a cell holding one claimed
# value fail at COMMIT with 23505, whether one statement, several
# statements, or a transaction and a row written before wrote them; with
# or without a unique index. char(n) values are claimed in one form, the
# one verify() reads, so an untouched table has no drift and its rows can
# be deleted. The finished-lease list of a backend stays bounded under
# REPEATABLE READ, and the 55P03 detail is one sentence. The columns are
# deferred (043_immediate_claims.pl checks the same at the statement).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
my $tables = q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE INDEX ON users (username);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id',
         "deferrable" => true, initially_deferred => true);
CREATE TABLE members (id bigint PRIMARY KEY, username text UNIQUE);
SELECT claims_cell.claim_column('members', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS',
         "deferrable" => true, initially_deferred => true);
CREATE TABLE keys (id int PRIMARY KEY, fingerprint char(12), user_id bigint);
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'user_id',
         "deferrable" => true, initially_deferred => true);
};
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => $tables);
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two',
	sql => $tables);

# The store's claims of a value: "creator:source id hex" per claim, sorted.
sub owners
{
	my ($value) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(creator_id || ':' || encode(source_id, 'hex'), ',' ORDER BY creator_id), '')
  FROM claims WHERE bucket_value = '$value' AND status = 'ACTIVE'});
}

my ($st, $out, $err);

# --- Two rows, one statement.
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (1, 'twin'), (2, 'twin')});
is($st, '23505', 'two rows of one INSERT holding one value: unique violation at COMMIT');
like($err, qr/value "twin" of claimed column "username" of table "users" is held by more than one row/,
	'the error names the value, column and table');
is(owners('twin'), '', 'nothing is claimed');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users}), '0', 'no row is kept');

# --- Two rows, two statements of one transaction.
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO users VALUES (1, 'twin');
INSERT INTO users VALUES (2, 'twin');
COMMIT;
});
is($st, '23505', 'two statements: unique violation at COMMIT');
is(owners('twin'), '', 'nothing is claimed');

# --- A committed, claimed row and a new row of another transaction.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'twin')});
is(owners('twin'), '1:0000000000000001', 'twin is claimed for row 1');
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (2, 'twin')});
is($st, '23505', 'a committed row and a new row: unique violation');
# The same with row 1 moved to a new key in the transaction: the replace
# would hand the claim to one row while the other holds the value too.
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
UPDATE users SET id = 9 WHERE id = 1;
INSERT INTO users VALUES (2, 'twin');
COMMIT;
});
is($st, '23505', 'a row moved to a new key and a new row of its value: unique violation');
is(owners('twin'), '1:0000000000000001', 'the claim still names row 1');

# --- A row written with the triggers off holds the value; a new row of
# another transaction must not claim it as its own.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (3, 'shadow');
});
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (4, 'shadow')});
is($st, '23505', 'a row written before holds the value: unique violation at COMMIT');
like($err, qr/"shadow"/, 'the error names the value');
is(owners('shadow'), '', 'nothing is claimed for row 4');

# --- A column with no index at all is not searched at COMMIT (a scan per
# value): such a row is left to the store and verify().
$node->safe_psql('cell1', q{
CREATE TABLE plain (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('plain', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
SET session_replication_role = replica;
INSERT INTO plain VALUES (3, 'shadow2');
});
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO plain VALUES (4, 'shadow2')});
is($st, '00000', 'a column without an index is not searched at COMMIT') or diag($err);
like( $node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('plain')}),
	qr/^2\|/, 'verify() reports both rows holding the value as missing');

# --- Deleting a twin never releases the other's claim (the original defect:
# the delete of row 2 destroyed the claim row 1 still needed).
$node->safe_psql('cell1', q{INSERT INTO users VALUES (5, 'solo')});
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO users VALUES (6, 'solo');
DELETE FROM users WHERE id = 6;
COMMIT;
});
is($st, '00000', 'a row added and deleted again in one transaction is no twin');
is(owners('solo'), '1:0000000000000005', 'the claim of row 5 stands');
($st, $out, $err) = sql_state($node, 'cell2', q{INSERT INTO users VALUES (5, 'solo')});
is($st, '23505', 'and another cell cannot take the value');

# --- With a unique index the local constraint answers first, as usual.
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO members VALUES (1, 'dup'), (2, 'dup')});
is($st, '23505', 'a unique index refuses two rows of one value itself');
like($err, qr/members_username_key/, 'by its own constraint');
# Two tables claiming one bucket: two rows, one in each.
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO members VALUES (7, 'both');
INSERT INTO users VALUES (7, 'both');
COMMIT;
});
is($st, '23505', 'two tables claiming one bucket type: two rows of one value fail');
is(owners('both'), '', 'nothing is claimed');

# --- A swap in one UPDATE is no duplicate.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (10, 'left'), (11, 'right')});
($st, $out, $err) = sql_state($node, 'cell1', q{
UPDATE users SET username = CASE username WHEN 'left' THEN 'right' ELSE 'left' END WHERE id IN (10, 11)});
is($st, '00000', 'two rows swapping values in one UPDATE commit') or diag($err);
is(owners('left') . ' ' . owners('right'), '1:000000000000000b 1:000000000000000a',
	'each value now names the other row');

# --- char(n): one canonical form. The value is claimed unpadded, as
# verify() reads it (column::text), so nothing drifts and the row can go.
$node->safe_psql('cell1', q{INSERT INTO keys VALUES (1, 'SHA256:ab', 1)});
is($store->safe_psql('postgres', q{SELECT bucket_value FROM claims WHERE source_id = int8send(1) AND bucket_type =
  (SELECT type_id FROM claim_bucket_types WHERE name = 'SSH_KEY_FINGERPRINTS')}),
	'SHA256:ab', 'a char(12) value is claimed without its padding');
is($node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('keys')}),
	'0|0|0|0|0', 'verify() finds no drift on an untouched char(n) table');
($st, $out, $err) = sql_state($node, 'cell1', q{UPDATE keys SET fingerprint = 'SHA256:ab  ' WHERE id = 1});
is($st, '00000', 'padding the same value changes nothing');
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM keys WHERE id = 1});
is($st, '00000', 'the row is deleted') or diag($err);
is(owners('SHA256:ab'), '', 'and its claim released');

# --- A row whose value the store does not hold (written with the triggers
# off) goes away: what the store holds is released, the rest counted as
# drift with a WARNING, and the transaction commits.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (30, 'ghost1'), (31, 'ghost2'), (32, 'ghost3');
});
$node->safe_psql('cell1', q{INSERT INTO users VALUES (33, 'real')});
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id IN (30, 33)});
is($st, '00000', 'deleting a row whose value was never claimed commits') or diag($err);
like($err, qr/WARNING:.*value "ghost1" of column "username" of table "users" was not claimed at the claims store/,
	'with a WARNING naming the value');
is(owners('real'), '', 'the claim the store held is released in the same transaction');
($st, $out, $err) = sql_state($node, 'cell1', q{UPDATE users SET username = 'ghost2-new' WHERE id = 31});
is($st, '00000', 'renaming such a row commits') or diag($err);
is(owners('ghost2-new'), '1:000000000000001f', 'and claims the new value');
($st, $out, $err) = sql_state($node, 'cell1', q{UPDATE users SET id = 35 WHERE id = 32});
is($st, '00000', 'moving such a row to a new key commits') or diag($err);
is(owners('ghost3'), '1:0000000000000023', 'and its value is claimed for the new key');
is($node->safe_psql('cell1', q{SELECT unclaimed_destroys FROM claims_cell.stats}), '3',
	'claims_cell.stats counts the three destroys the store did not hold');

# --- verify() in a transaction that wrote the table: refused, since its
# rows are claimed only at COMMIT (it counted them missing, and a repair
# claimed them before the COMMIT claimed them again).
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO users VALUES (40, 'mine');
SELECT * FROM claims_cell.verify('users', repair => true);
COMMIT;
});
is($st, '0A000', 'verify() of a table the transaction changed is refused');
like($err, qr/cannot verify table public.users in a transaction that changed its claimed values/, 'saying why');
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO keys VALUES (40, 'mine', 40);
COMMIT;
SET claims_cell.verify_recent = 0;
SELECT * FROM claims_cell.verify('keys');
});
is($st, '00000', 'after COMMIT verify() runs');
like($out, qr/^0\|0\|0\|0\|0$/m, 'and finds the row claimed') or diag($out);

# --- 55P03: one sentence, one full stop.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (20, 'busy')});
my $lease = $store->safe_psql('postgres', q{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "destroy_records": [{"bucket": {"type": "USERNAMES", "value": "busy"}}]}')->>'lease_uuid'});
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 20});
is($st, '55P03', 'a value under another lease: 55P03');
like($err, qr/DETAIL:[^\n]*\(temporary\)\.\n/, 'the detail ends with one full stop');
unlike($err, qr/\.\.\n/, 'never two');
$store->safe_psql('postgres', "SET ROLE cell_one; SELECT claims_rollback(1, '$lease')");

# --- REPEATABLE READ without the worker: the committed leases whose rows
# wait for a READ COMMITTED transaction are bounded in number.
my $used = q{SELECT total_bytes FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext'};
my $script = "SET default_transaction_isolation = 'repeatable read';\n"
  . join('', map { "INSERT INTO users VALUES (" . (1000 + $_) . ", 'rr$_');\n" } 1 .. 1100)
  . "$used \\gset before_\n"
  . join('', map { "INSERT INTO users VALUES (" . (3000 + $_) . ", 'rr-b$_');\n" } 1 .. 1500)
  . "SELECT :before_total_bytes, ($used);\n";
($st, $out, $err) = sql_state($node, 'cell1', $script);
is($st, '00000', '2600 claiming REPEATABLE READ transactions in one session');
my ($before, $after) = split /\|/, $out;
cmp_ok($after - $before, '<', 32768,
	"TopMemoryContext stays bounded under REPEATABLE READ ($before -> $after)");

done_testing();
