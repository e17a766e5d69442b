# A value is released only when no row of the cell holds it in any claimed
# column of its bucket type, paused columns included, whoever owns the
# table. A delegated role that claimed its own table notes.title as
# USERNAMES while it already held 'alice' used to release, by deleting its
# row, cell 1's claim of 'alice' that a users row of another role still
# held, and cell 2 then took it. Now such a release becomes a replace for
# the row that still holds the value, at the statement (immediate), at
# COMMIT (deferred) and on TRUNCATE; a value nobody else holds is released
# as before.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text UNIQUE);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users VALUES (1, 'alice'), (2, 'bob'), (3, 'carol'), (4, 'dave');
CREATE ROLE app LOGIN;
GRANT CREATE ON SCHEMA public TO app;
GRANT USAGE ON SCHEMA claims_cell TO app;
GRANT EXECUTE ON FUNCTION claims_cell.claim_column(regclass, name, text, text, name, text, boolean, boolean) TO app;
});
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

sub store_of
{
	my ($value) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce((SELECT c.creator_id || ':' || c.status || ':' || t.name
                   FROM claims c JOIN claim_source_types t ON t.type_id = c.source_type
                  WHERE c.bucket_value = '$value'), 'none')});
}

sub cell2_takes
{
	my ($id, $value) = @_;
	my ($st) = sql_state($node, 'cell2', "INSERT INTO users VALUES ($id, '$value')");
	return $st;
}

# The delegated role's table, holding 'alice' before it is claimed.
my ($st, $out, $err) = sql_state($node, 'cell1', q{
SET ROLE app;
CREATE TABLE notes (id bigint PRIMARY KEY, title text);
INSERT INTO notes VALUES (10, 'alice'), (11, 'erin'), (13, 'dave');
SELECT claims_cell.claim_column('notes', 'title', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
INSERT INTO notes VALUES (12, 'erin');});
is($st, '00000', 'the role claims its table holding alice') or diag($err);
is(store_of('erin'), '1:ACTIVE:RAILS_TABLE_SNIPPETS', 'a second row of erin, inserted after the declaration, claims it');

($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; DELETE FROM notes WHERE id = 10});
is($st, '00000', 'the role deletes its row of alice') or diag($err);
is(store_of('alice'), '1:ACTIVE:RAILS_TABLE_USERS', 'alice stays claimed, now for the users row that holds it');
is(cell2_takes(100, 'alice'), '23505', 'cell 2 cannot take alice');

# A paused column's rows hold their values too.
$node->safe_psql('cell1', q{
CREATE TABLE legacy (id bigint PRIMARY KEY, handle text);
SELECT claims_cell.claim_column('legacy', 'handle', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_MEMBERS');
SELECT claims_cell.set_claiming('legacy', 'handle', false);
INSERT INTO legacy VALUES (20, 'bob');});
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 2});
is($st, '00000', 'users\' row of bob goes') or diag($err);
is(store_of('bob'), '1:ACTIVE:RAILS_TABLE_MEMBERS', 'bob stays claimed for the paused column\'s row');
is(cell2_takes(101, 'bob'), '23505', 'cell 2 cannot take bob');

# A deferred column: the release is judged at COMMIT.
$node->safe_psql('cell1', q{
CREATE TABLE drafts (id bigint PRIMARY KEY, author text);
INSERT INTO drafts VALUES (30, 'carol');
SELECT claims_cell.claim_column('drafts', 'author', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_PROJECTS',
         "deferrable" => true, initially_deferred => true);});
($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN; DELETE FROM users WHERE id = 3; COMMIT;});
is($st, '00000', 'users\' row of carol goes in a transaction') or diag($err);
is(store_of('carol'), '1:ACTIVE:RAILS_TABLE_PROJECTS', 'carol stays claimed for the deferred column\'s row');
($st, $out, $err) = sql_state($node, 'cell1', q{BEGIN; DELETE FROM drafts WHERE id = 30; COMMIT;});
is($st, '00000', 'the last holder of carol goes at COMMIT') or diag($err);
is(store_of('carol'), 'none', 'and carol is released');

# TRUNCATE: another table's row keeps dave; the truncated table's own rows keep nothing.
($st, $out, $err) = sql_state($node, 'cell1', q{TRUNCATE notes});
is($st, '00000', 'TRUNCATE of the role\'s table') or diag($err);
is(store_of('dave'), '1:ACTIVE:RAILS_TABLE_USERS', 'dave stays claimed for users\' row');
is(store_of('erin'), 'none', 'erin, held by two rows of the truncated table only, is released');

# A column of another type sharing the bucket type: its rows are matched
# by text, so a value that is no integer still goes (the typed equality
# used to fail the DELETE with 22P02).
$node->safe_psql('cell1', q{
CREATE TABLE numbers (id bigint PRIMARY KEY, n integer);
SELECT claims_cell.claim_column('numbers', 'n', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_KEYS');
INSERT INTO users VALUES (5, 'fred'), (6, '77');
SET session_replication_role = replica;
INSERT INTO numbers VALUES (40, 77);});
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 5});
is($st, '00000', 'a value that is no integer is released beside an integer column') or diag($err);
is(store_of('fred'), 'none', 'fred is released');
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 6});
is($st, '00000', 'users\' row of 77 goes') or diag($err);
is(store_of('77'), '1:ACTIVE:RAILS_TABLE_KEYS', '77 stays claimed for the integer column\'s row');

# REPEATABLE READ: the holder is read and locked at its latest version, so
# a holder updated (in another column) since the snapshot is no conflict.
$node->safe_psql('cell1', q{
CREATE TABLE profiles (id bigint PRIMARY KEY, handle text, bio text);
INSERT INTO users VALUES (7, 'gina');
SET session_replication_role = replica;
INSERT INTO profiles VALUES (50, 'gina', 'old');
RESET session_replication_role;
SELECT claims_cell.claim_column('profiles', 'handle', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_ORGANIZATIONS');});
my $rr = $node->background_psql('cell1', on_error_stop => 0);
$rr->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1});
$node->safe_psql('cell1', q{UPDATE profiles SET bio = 'new' WHERE id = 50});
my (undef, $failed) = $rr->query(q{DELETE FROM users WHERE id = 7});
ok(!$failed, 'under REPEATABLE READ a holder updated since the snapshot does not fail the release')
  or diag($rr->{stderr});
$rr->query_safe('COMMIT');
$rr->quit;
is(store_of('gina'), '1:ACTIVE:RAILS_TABLE_ORGANIZATIONS', 'gina stays claimed for the profile');

# A value inserted and deleted in one transaction sends nothing, held elsewhere or not.
my $begins = $node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats');
($st, $out, $err) = sql_state($node, 'cell1', q{
BEGIN; SELECT claims_cell.set_constraints('DEFERRED');
INSERT INTO drafts VALUES (31, 'gina'); DELETE FROM drafts WHERE id = 31; COMMIT;});
is($st, '00000', 'a deferred row of gina inserted and deleted again') or diag($err);
is($node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats'), $begins, 'takes no lease, though profiles holds gina');

# With no holder left a value is released as before.
($st, $out, $err) = sql_state($node, 'cell1', q{DELETE FROM users WHERE id = 1});
is($st, '00000', 'users\' row of alice goes') or diag($err);
is(store_of('alice'), 'none', 'alice is released');
is(cell2_takes(102, 'alice'), '00000', 'and cell 2 takes it');

is($node->safe_psql('cell1', q{SELECT sum(missing + extra + drifted) FROM claims_cell.verify('users')}), '0',
	'verify(users) finds cell 1 and the store in agreement');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'nothing stays leased');

done_testing();
