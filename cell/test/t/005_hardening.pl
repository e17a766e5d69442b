# The cell side under hostile or unusual conditions: a user's operator in
# the search path at COMMIT, a claimed table dropped by the transaction
# that changed it, a begin_update abandoned after a timeout, read-only and
# serializable transactions after a claim, stats of several databases,
# memory over many transactions, and a LATIN1 cell database.
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

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ],
	[ 3, 'cell-three', 'cell_three' ]);
my $node = cell_node('cells');
my $users = q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE notes (id bigint PRIMARY KEY, body text);
};
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => $users);
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two',
	sql => $users);

my @psql = ('psql', '-X', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-h', $node->host,
	'-p', $node->port);

# The store's claim of a value: "status:creator:subject", or '' without one.
sub store_claim
{
	my ($value) = @_;
	return $store->safe_psql('postgres', qq{
SELECT status || ':' || creator_id || ':' || subject_id FROM claims WHERE bucket_value = '$value'});
}

# Leases of a cell still outstanding at the store.
sub outstanding
{
	my ($cell) = @_;
	return $store->safe_psql('postgres',
		"SELECT count(*) FROM claim_leases WHERE creator_id = $cell AND state = 'outstanding'");
}

# An interactive psql session on a cell database.
sub session
{
	my ($db) = @_;
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start([ @psql, '-d', $db ], '<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# Send SQL to a session and wait until it printed the marker.
sub send_wait
{
	my ($s, $sql, $marker) = @_;
	$s->{in} .= "$sql\nSELECT '$marker';\n";
	$s->{h}->pump while $s->{out} !~ /\Q$marker\E/ && $s->{h}->pumpable;
	return;
}

# --- A user-defined = operator in the search path at COMMIT. The finished
# lease rows are deleted at the next write's PRE_COMMIT as the extension's
# owner; no name there may resolve in a schema the user controls.
$node->safe_psql('cell1', q{
CREATE ROLE app LOGIN;
CREATE SCHEMA app AUTHORIZATION app;
GRANT INSERT ON users TO app;
});
my ($st, $out, $err) = sql_state($node, 'cell1', q{
CREATE FUNCTION app.uuid_eq(uuid, uuid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  ALTER ROLE app SUPERUSER;
  RETURN $1::text = $2::text;
END $$;
CREATE OPERATOR app.= (LEFTARG = uuid, RIGHTARG = uuid, FUNCTION = app.uuid_eq);
SET search_path = app, pg_catalog;
INSERT INTO public.users VALUES (101, 'app-one');
INSERT INTO public.users VALUES (102, 'app-two');
}, extra_params => [ '-U', 'app' ]);
is($st, '00000', 'a role with its own = operator in the search path claims twice');
is($node->safe_psql('cell1', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}), 'f',
	'the operator never ran as the extension owner: app is not superuser');
is(store_claim('app-one') . ',' . store_claim('app-two'), 'ACTIVE:1:101,ACTIVE:1:102',
	'both values are claimed');

# --- A read-only transaction writing a temp table after a committed claim:
# the finished lease row waits for a transaction that may write.
($st, $out, $err) = sql_state($node, 'cell1', q{
CREATE TEMP TABLE scratch (x int);
INSERT INTO users VALUES (110, 'ro-one');
BEGIN READ ONLY;
INSERT INTO scratch VALUES (1);
COMMIT;
});
is($st, '00000', 'BEGIN READ ONLY; INSERT INTO a temp table; COMMIT after a claim succeeds');
is($err, '', 'without an error');

# --- Two serializable transactions, each after a committed claim of its
# session, each writing its own unclaimed table at the same time: the
# lease-row cleanup must not make them conflict.
# (With the lease table known to be small its rows are found by a sequential
# scan, whose predicate lock covers the whole table.)
$node->safe_psql('cell1', 'CREATE TABLE mine (x int); CREATE TABLE yours (x int)');
for my $round (1 .. 3)
{
	$node->safe_psql('cell1', 'VACUUM ANALYZE claims_cell.outstanding_leases');
	my ($a, $b) = (session('cell1'), session('cell1'));
	send_wait($a, "INSERT INTO users VALUES (" . (200 + 2 * $round) . ", 'ser-a$round');", 'a1');
	send_wait($b, "INSERT INTO users VALUES (" . (201 + 2 * $round) . ", 'ser-b$round');", 'b1');
	send_wait($a, 'BEGIN ISOLATION LEVEL SERIALIZABLE; INSERT INTO mine VALUES (1);', 'a2');
	send_wait($b, 'BEGIN ISOLATION LEVEL SERIALIZABLE; INSERT INTO yours VALUES (1);', 'b2');
	send_wait($a, 'COMMIT;', 'a3');
	send_wait($b, 'COMMIT;', 'b3');
	$_->{in} .= "\\q\n" for $a, $b;
	$_->{h}->finish for $a, $b;
	is($a->{err} . $b->{err}, '', "serializable round $round: both commit, no 40001");
}

# --- Stats of a database survive a reader in another cell database.
my $calls = $node->safe_psql('cell1', 'SELECT calls FROM claims_cell.stats');
cmp_ok($calls, '>', 0, 'cell1 has counted calls');
add_cell(node => $node, store => $store, db => 'cell3', cell_id => 3, role => 'cell_three');
$node->safe_psql('cell3', 'SELECT * FROM claims_cell.stats');
cmp_ok($node->safe_psql('cell1', 'SELECT calls FROM claims_cell.stats'), '>=', $calls,
	'reading the stats in another database does not reset those of cell1');
$node->safe_psql('cell2', 'SELECT * FROM claims_cell.stats');
cmp_ok($node->safe_psql('cell1', 'SELECT calls FROM claims_cell.stats'), '>=', $calls,
	'nor does reading them in a second one');

# --- TopMemoryContext does not grow with the number of claiming transactions.
my $used = q{SELECT used_bytes FROM pg_backend_memory_contexts WHERE name = 'TopMemoryContext'};
my $script = join('', map { "INSERT INTO users VALUES (" . (10000 + $_) . ", 'mem$_');\n" } 1 .. 20)
  . "$used \\gset before_\n"
  . join('', map { "INSERT INTO users VALUES (" . (20000 + $_) . ", 'mem-b$_');\n" } 1 .. 1000)
  . "SELECT :before_used_bytes, ($used);\n";
($st, $out, $err) = sql_state($node, 'cell1', $script);
is($st, '00000', '1000 claiming transactions in one session');
my ($before, $after) = split /\|/, $out;
cmp_ok($after - $before, '<', 16384,
	"TopMemoryContext grows by less than 16kB over 1000 transactions ($before -> $after)");
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'mem-b%'}),
	'1000', 'all 1000 values are claimed');

# --- A LATIN1 cell database claims a non-ASCII value.
add_cell(node => $node, store => $store, db => 'latin', cell_id => 3, role => 'cell_three',
	create_options => q{ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0},
	sql => $users);
($st, $out, $err) = sql_state($node, 'latin', q{INSERT INTO users VALUES (1, 'caf' || chr(233))});
is($st, '00000', 'a LATIN1 cell claims caf\x{e9}') or diag($err);
is( $store->safe_psql('postgres', q{
SELECT count(*) FROM claims WHERE creator_id = 3 AND status = 'ACTIVE'
   AND convert_to(bucket_value, 'UTF8') = '\x636166c3a9'::bytea}),
	'1', 'the store holds caf\x{e9} in UTF-8');

# --- A begin_update that times out is cancelled at the store: once the row
# lock it waited for is gone, it does not go on to lease the value.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (300, 'locked')});
my %l = (in => '', out => '', err => '');
$l{h} = IPC::Run::start([ 'psql', '-X', '-v', 'ON_ERROR_STOP=1', '-h', $store->host, '-p', $store->port, '-d', 'postgres' ],
	'<', \$l{in}, '>', \$l{out}, '2>', \$l{err});
send_wait(\%l, q{BEGIN; SELECT 1 FROM claims WHERE bucket_value = 'locked' FOR UPDATE;},
	'held');
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 300});
is($st, '08006', 'a DELETE of the locked value fails with 08006 after two timeouts');
# the store sees the closed sockets within client_connection_check_interval
ok( $store->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	 WHERE usename = 'cell_one' AND wait_event_type = 'Lock'}),
	'the store ends both tries\' statements while the lock is held');
$l{in} .= "COMMIT;\n\\q\n";
$l{h}->finish;
Time::HiRes::usleep(500_000);
is(outstanding(1), '0', 'no lease of the cell is left outstanding once the lock is gone');
is(store_claim('locked'), 'ACTIVE:1:300', 'the value is still ACTIVE, owned by the cell');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE id = 300}), '1',
	'and the row is still there');

# --- A claimed table dropped by the transaction that changed it claims and
# releases nothing (and does not crash at a conflict).
$node->safe_psql('cell2', q{INSERT INTO users VALUES (400, 'taken')});
my $doomed = q{
CREATE TABLE doomed (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('doomed', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');
};
$node->safe_psql('cell1', $doomed);
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO doomed VALUES (1, 'ghost');
DROP TABLE doomed;
COMMIT;
});
is($st, '00000', 'a new value in a table dropped before COMMIT: the commit succeeds');
is(store_claim('ghost'), '', 'ghost is not claimed at the store');
is(outstanding(1), '0', 'the statement\'s lease of ghost was rolled back');
$node->safe_psql('cell1', $doomed);
($st) = sql_state($node, 'cell1', q{INSERT INTO doomed VALUES (1, 'taken')});
is($st, '23505', 'immediate: a value of another cell fails the statement');
$node->safe_psql('cell1', q{DROP TABLE doomed});
$doomed =~ s/'RAILS_TABLE_USERS'/'RAILS_TABLE_USERS', true, true/;
$node->safe_psql('cell1', $doomed);
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN;
INSERT INTO doomed VALUES (1, 'taken');
DROP TABLE doomed;
COMMIT;
});
is($st, '00000', 'deferred: a value of another cell in a table dropped before COMMIT: the commit succeeds');
unlike($err, qr/server closed|terminated|ERROR/, 'without an error');
is($node->psql('cell1', 'SELECT 1'), 0, 'the server is still up');
is(store_claim('taken'), 'ACTIVE:2:400', 'the value stays with the other cell');
is(outstanding(1), '0', 'no lease of the cell outstanding');

$node->stop;
$store->stop;
done_testing();
