# Declarations of claimed columns against a real store: RENAME COLUMN and
# RENAME TABLE keep claiming, DROP TABLE forgets the declaration (the
# values stay claimed at the store), DROP EXTENSION still works.
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
my %role = (cell1 => 'cell_one', cell2 => 'cell_two');
for my $db ('cell1', 'cell2')
{
	add_cell(node => $node, store => $store, db => $db, cell_id => $db eq 'cell1' ? 1 : 2,
		role => $role{$db}, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}

# Run SQL in a cell database: (SQLSTATE or '00000', stderr).
sub run
{
	my ($db, $sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql($db, "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : '00000', $err);
}

# The store's usernames of a cell, sorted.
sub store_names
{
	my ($cell) = @_;
	return $store->safe_psql('postgres', qq{
SELECT string_agg(c.bucket_value, ',' ORDER BY c.bucket_value) FROM claims c
 WHERE c.creator_id = $cell AND c.status = 'ACTIVE'});
}

is((run('cell1', q{INSERT INTO users VALUES (1, 'alice', 'a@x')}))[0], '00000', 'alice claimed');

# RENAME COLUMN and RENAME TABLE (the subject column too): claiming goes on.
$node->safe_psql('cell1', q{
ALTER TABLE users RENAME COLUMN username TO login;
ALTER TABLE users RENAME COLUMN id TO user_id;
ALTER TABLE users RENAME TO accounts;
});
is( $node->safe_psql('cell1', q{SELECT table_name || '.' || column_name || ' by ' || subject_column
	 FROM claims_cell.claimed_columns}), 'accounts.login by user_id',
	'the declaration shows the new names');
is((run('cell1', q{INSERT INTO accounts VALUES (2, 'bob', 'b@x')}))[0], '00000',
	'an INSERT after the renames claims');
is((run('cell1', q{UPDATE accounts SET login = 'alicia' WHERE user_id = 1}))[0], '00000',
	'an UPDATE after the renames claims and releases');
is(store_names(1), 'alicia,bob', 'the store follows');
my ($st, $err) = run('cell2', q{INSERT INTO users VALUES (5, 'bob', NULL)});
is($st, '23505', 'the other cell cannot take bob');
($st, $err) = run('cell1', q{INSERT INTO accounts VALUES (3, 'alicia', NULL)});
isnt($st, '00000', 'a duplicate in the same cell is refused');
$node->safe_psql('cell2', q{INSERT INTO users VALUES (6, 'carol', NULL)});
($st, $err) = run('cell1', q{INSERT INTO accounts VALUES (4, 'carol', NULL)});
is($st, '23505', 'a value of the other cell is refused after the renames');
like($err, qr/value "carol" of column "login" of table "accounts" is already claimed/,
	'the conflict names the column and table as they are now');

# set_claiming and unclaim_column by the new name.
$node->safe_psql('cell1', q{SELECT claims_cell.set_claiming('accounts', 'login', false)});
is((run('cell1', q{INSERT INTO accounts VALUES (5, 'paused', NULL)}))[0], '00000',
	'a paused column claims nothing');
is(store_names(1), 'alicia,bob', 'nothing claimed while paused');
$node->safe_psql('cell1', q{DELETE FROM accounts WHERE user_id = 5;
	SELECT claims_cell.set_claiming('accounts', 'login', true)});

# DROP TABLE forgets the declaration; the values stay claimed at the store.
$node->safe_psql('cell1', 'DROP TABLE accounts');
is($node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.claimed_attributes'), '0',
	'DROP TABLE removed the declaration');
is(store_names(1), 'alicia,bob', 'the values stay claimed at the store');

# A column claimed again after a rename gets a trigger of its own.
$node->safe_psql('cell2', q{
ALTER TABLE users RENAME COLUMN username TO handle;
ALTER TABLE users ADD COLUMN username text;
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
is( $node->safe_psql('cell2', q{SELECT string_agg(column_name || ':' || trigger_name, ',' ORDER BY column_name)
	 FROM claims_cell.claimed_columns}),
	'handle:claims_cell_username,username:claims_cell_attnum_4', 'two triggers, two names');
is((run('cell2', q{INSERT INTO users VALUES (7, 'dave', NULL, 'erin')}))[0], '00000',
	'both columns claim');
is(store_names(2), 'carol,dave,erin', 'the store has both');
$node->safe_psql('cell2', q{SELECT claims_cell.unclaim_column('users', 'handle')});
is( $node->safe_psql('cell2', q{SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger
	 WHERE tgrelid = 'users'::regclass}), 'claims_cell_attnum_4,claims_cell_statement,claims_cell_truncate',
	'unclaim_column by the new name drops the right trigger');

# DROP EXTENSION with a claimed table, and back.
is((run('cell2', 'DROP EXTENSION claims_cell CASCADE'))[0], '00000', 'DROP EXTENSION CASCADE');
is($node->safe_psql('cell2', q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'users'::regclass}),
	'0', 'the triggers went with it');
is((run('cell2', 'CREATE EXTENSION claims_cell; DROP TABLE users'))[0], '00000',
	'CREATE EXTENSION again, and DROP TABLE with nothing claimed');

$node->stop;
$store->stop;
done_testing();
