# Inheritance and claimed tables. A child's rows are rows of its parent
# (SELECT FROM parent shows them) but the parent's claim triggers do not
# fire for them: a row inserted into CREATE TABLE admins () INHERITS (users)
# held a value another cell owned until verify() ran. So claim_column
# refuses a table with inheritance children, and a claimed table gets none:
# CREATE TABLE ... INHERITS and ALTER TABLE ... INHERIT fail with 0A000, for
# a superuser and for a delegated role alike. A child claimed on its own is
# claimed like any table.
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
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}
$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken')});

# A claimed table gets no children.
my ($st, $out, $err) = sql_state($node, 'cell1', q{CREATE TABLE admins () INHERITS (users)});
is($st, '0A000', 'CREATE TABLE ... INHERITS of a claimed table fails');
like($err, qr/table "admins" cannot inherit from table "users", which has claimed columns/, 'naming both tables');
is($node->safe_psql('cell1', q{SELECT to_regclass('admins') IS NULL}), 't', 'the child is not created');
$node->safe_psql('cell1', q{CREATE TABLE staff (id bigint PRIMARY KEY, username text)});
($st, $out, $err) = sql_state($node, 'cell1', q{ALTER TABLE staff INHERIT users});
is($st, '0A000', 'ALTER TABLE ... INHERIT a claimed table fails');
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_inherits WHERE inhparent = 'users'::regclass}), '0',
	'users has no child');
($st) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (2, 'taken')});
is($st, '23505', 'a value cell 2 owns cannot reach users by any table');

# Every way of making a child meets the refusal.
for my $case (
	[ 'CREATE SCHEMA with a child inside', q{CREATE SCHEMA s1 CREATE TABLE admins () INHERITS (public.users)} ],
	[ 'a foreign table', q{CREATE FOREIGN TABLE ft () INHERITS (users) SERVER topology} ],
	[ 'a foreign table made a child', q{CREATE FOREIGN TABLE ft2 (id bigint NOT NULL, username text) SERVER topology;
ALTER FOREIGN TABLE ft2 INHERIT users} ],
	[ 'the replica role', q{SET session_replication_role = replica; CREATE TABLE ghosts () INHERITS (users)} ])
{
	my ($name, $sql) = @$case;
	($st, $out, $err) = sql_state($node, 'cell1', $sql);
	is($st, '0A000', "$name is refused") or diag($err);
}
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_inherits WHERE inhparent = 'users'::regclass}), '0',
	'users still has no child');

# The claim is read as it is now, not as a REPEATABLE READ snapshot saw it.
$node->safe_psql('cell1', q{CREATE TABLE late (id bigint PRIMARY KEY, username text)});
my $rr = $node->background_psql('cell1', on_error_stop => 0);
$rr->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1});
$node->safe_psql('cell1',
	q{SELECT claims_cell.claim_column('late', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_ROUTES')});
my (undef, $failed) = $rr->query(q{CREATE TABLE late_child () INHERITS (late)});
ok($failed, 'a snapshot older than the declaration does not let a child through');
like($rr->{stderr}, qr/table "late_child" cannot inherit from table "late"/, 'it is refused as any other');
$rr->query('ROLLBACK');
$rr->quit;

# A child made before the event trigger existed (as from 1.4) blocks no other DDL.
$node->safe_psql('cell1', q{
ALTER EVENT TRIGGER claims_cell_follow_table_ddl DISABLE;
CREATE TABLE legacy_child () INHERITS (late);
ALTER EVENT TRIGGER claims_cell_follow_table_ddl ENABLE ALWAYS;});
($st, $out, $err) = sql_state($node, 'cell1', q{CREATE TABLE unrelated (x int); ALTER TABLE late ADD COLUMN note text});
is($st, '00000', 'unrelated DDL goes on beside a child from before') or diag($err);

# A delegated role meets the same refusal (the event trigger runs as the extension's owner).
$node->safe_psql('cell1', q{
CREATE ROLE app LOGIN;
GRANT CREATE ON SCHEMA public TO app;
GRANT USAGE ON SCHEMA claims_cell TO app;
GRANT EXECUTE ON FUNCTION claims_cell.claim_column(regclass, name, text, text, name, text, boolean, boolean) TO app;
SET ROLE app;
CREATE TABLE accounts (id bigint PRIMARY KEY, handle text);
SELECT claims_cell.claim_column('accounts', 'handle', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
});
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; CREATE TABLE bots () INHERITS (accounts)});
is($st, '0A000', 'a delegated role cannot give its claimed table a child') or diag($err);

# A table with children cannot be claimed.
$node->safe_psql('cell1', q{
CREATE TABLE people (id bigint PRIMARY KEY, username text);
CREATE TABLE admins () INHERITS (people);
ALTER TABLE admins ADD PRIMARY KEY (id);});
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('people', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_MEMBERS')});
is($st, '0A000', 'claim_column refuses a table with inheritance children');
like($err, qr/cannot claim a column of table "people" because it has inheritance children/, 'and says why');
is($node->safe_psql('cell1', q{SELECT count(*) FROM claims_cell.claimed_columns WHERE table_name = 'people'::regclass}),
	'0', 'nothing is declared');
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'people'::regclass}), '0',
	'and no trigger is installed');

# A child claimed on its own is an ordinary claimed table.
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('admins', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_MEMBERS')});
is($st, '00000', 'a child without children of its own can be claimed') or diag($err);
($st) = sql_state($node, 'cell1', q{INSERT INTO admins VALUES (3, 'taken')});
is($st, '23505', 'and its rows are claimed');
($st) = sql_state($node, 'cell1', q{INSERT INTO admins VALUES (4, 'root')});
is($st, '00000', 'a free value is claimed through it');
is($store->safe_psql('postgres', q{SELECT creator_id || ':' || status FROM claims WHERE bucket_value = 'root'}),
	'1:ACTIVE', 'at the store, for cell 1');

# Unclaimed, the parent may get children again.
$node->safe_psql('cell1', q{SELECT claims_cell.unclaim_column('users', 'username')});
($st, $out, $err) = sql_state($node, 'cell1', q{CREATE TABLE admins2 () INHERITS (users)});
is($st, '00000', 'an unclaimed table may get children') or diag($err);

done_testing();
