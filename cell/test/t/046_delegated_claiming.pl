# Delegated claiming: an administrator grants a role EXECUTE on
# claim_column, set_claiming and unclaim_column (and USAGE on the schema);
# the role may then claim and unclaim the columns of the tables it owns, as
# a migration running as the application's role does, and nothing else:
# other roles' tables, configure() and the extension's tables stay closed.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cells');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE ROLE app LOGIN;
CREATE ROLE other LOGIN;
GRANT CREATE ON SCHEMA public TO app, other;
});
$node->safe_psql('cell1', q{
SET ROLE app;
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SET ROLE other;
CREATE TABLE others (id bigint PRIMARY KEY, username text);
});

sub as_app
{
	my ($sql) = @_;
	return sql_state($node, 'cell1', "SET ROLE app;\n$sql");
}

my $claim = q{SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id')};
my ($st) = as_app($claim);
is($st, '42501', 'without a grant the role cannot claim');

$node->safe_psql('cell1', q{
GRANT USAGE ON SCHEMA claims_cell TO app;
GRANT EXECUTE ON FUNCTION claims_cell.claim_column(regclass, name, text, text, name, text, boolean, boolean),
                          claims_cell.set_claiming(regclass, name, boolean),
                          claims_cell.unclaim_column(regclass, name) TO app;
});
($st, my $out, my $err) = as_app($claim);
is($st, '00000', 'with the grant the role claims a column of its own table') or diag($err);
is($node->safe_psql('cell1', q{SELECT table_name::text || '.' || column_name FROM claims_cell.claimed_columns}),
	'users.username', 'the declaration is recorded');
($st) = as_app(q{INSERT INTO users VALUES (1, 'alice')});
is($st, '00000', 'the role\'s rows are claimed');
is($store->safe_psql('postgres', q{SELECT bucket_value || ':' || status FROM claims}), 'alice:ACTIVE',
	'at the store');

($st, $out, $err) = as_app(q{SELECT claims_cell.claim_column('others', 'username', 'USERNAMES', 'USER', 'id')});
is($st, '42501', 'a table of another role cannot be claimed');
like($err, qr/must be owner of table others/, 'the message says why');
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_trigger WHERE tgrelid = 'others'::regclass}), '0',
	'and it has no trigger');
($st) = as_app(q{SELECT claims_cell.configure('topology', 2)});
is($st, '42501', 'configure() stays the superuser\'s');
($st) = as_app(q{INSERT INTO claims_cell.claimed_attributes (table_name, attnum, bucket_type, subject_type, subject_attnum,
  source_type, source_attnum, trigger_name) VALUES ('others', 2, 'USERNAMES', 'USER', 1, 'RAILS_TABLE_USERS', 1, 'x')});
is($st, '42501', 'the extension\'s tables stay closed');
($st) = as_app(q{SELECT * FROM claims_cell.verify('users')});
is($st, '42501', 'verify() stays the administrator\'s');

# The owner of a claimed table of another role cannot unclaim or pause it.
$node->safe_psql('cell1',
	q{SELECT claims_cell.claim_column('others', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS')});
($st) = as_app(q{SELECT claims_cell.unclaim_column('others', 'username')});
is($st, '42501', 'a column of another role\'s table cannot be unclaimed');
($st) = as_app(q{SELECT claims_cell.set_claiming('others', 'username', false)});
is($st, '42501', 'nor paused');
($st) = as_app(q{SELECT claims_cell.set_claiming('users', 'username', false); SELECT claims_cell.set_claiming('users', 'username', true)});
is($st, '00000', 'the role pauses and resumes its own column');
($st) = as_app(q{SELECT claims_cell.unclaim_column('users', 'username')});
is($st, '00000', 'and unclaims it');
is($node->safe_psql('cell1', q{SELECT string_agg(tgname, ',' ORDER BY tgname) FROM pg_trigger WHERE tgrelid = 'users'::regclass}),
	'', 'its triggers are gone');

done_testing();
