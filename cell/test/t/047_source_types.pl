# Source types for any application: claim_column of a table whose source
# type the store does not know fails with a hint naming the exact statement
# to run at the store (which then makes it work), or registers the type
# when the store lets the cell's role insert into its registry.
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
CREATE TABLE auth_user (id int PRIMARY KEY, username text);
CREATE TABLE accounts (id bigint PRIMARY KEY, handle text);
});

my ($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('auth_user', 'username', 'USERNAMES', 'USER', 'id', 'DJANGO_TABLE_AUTH_USER')});
is($st, '22023', 'an unknown source type fails at claim_column');
like($err, qr/unknown source type "DJANGO_TABLE_AUTH_USER"/, 'naming the type');
my ($statement) = $err =~ /HINT:\s+Register it at the store as its administrator: (INSERT INTO .*;)/;
ok(defined $statement, 'the hint names the statement to run at the store') or diag($err);
is($node->safe_psql('cell1', 'SELECT count(*) FROM pg_trigger WHERE tgrelid = \'auth_user\'::regclass'), '0',
	'nothing is installed');

# The hint's statement, run at the store as it is, makes the claim work.
$store->safe_psql('postgres', $statement);
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('auth_user', 'username', 'USERNAMES', 'USER', 'id', 'DJANGO_TABLE_AUTH_USER')});
is($st, '00000', 'after the statement the column is claimed') or diag($err);
($st) = sql_state($node, 'cell1', q{INSERT INTO auth_user VALUES (1, 'alice')});
is($st, '00000', 'and its rows are claimed');
is( $store->safe_psql('postgres',
		q{SELECT s.name FROM claims c JOIN claim_source_types s ON s.type_id = c.source_type WHERE c.bucket_value = 'alice'}),
	'DJANGO_TABLE_AUTH_USER', 'with their source type');

# The default RAILS_TABLE_<TABLE> of a table the store does not know.
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('accounts', 'handle', 'USERNAMES', 'USER', 'id')});
is($st, '22023', 'the default source type of an unknown table fails too');
like($err, qr/'RAILS_TABLE_ACCOUNTS'/, 'and the hint names it');

# A store that lets the cell register source types.
$store->safe_psql('postgres', q{GRANT SELECT, INSERT ON claim_source_types TO cell_one});
($st, $out, $err) = sql_state($node, 'cell1',
	q{SELECT claims_cell.claim_column('accounts', 'handle', 'USERNAMES', 'USER', 'id')});
is($st, '00000', 'when the store allows it, claim_column registers the source type') or diag($err);
like($err, qr/registered source type "RAILS_TABLE_ACCOUNTS"/, 'and says so');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_source_types WHERE name = 'RAILS_TABLE_ACCOUNTS' AND NOT builtin}),
	'1', 'the store has it');
($st) = sql_state($node, 'cell1', q{INSERT INTO accounts VALUES (1, 'bob')});
is($st, '00000', 'and the column claims');
is( $store->safe_psql('postgres',
		q{SELECT s.name FROM claims c JOIN claim_source_types s ON s.type_id = c.source_type WHERE c.bucket_value = 'bob'}),
	'RAILS_TABLE_ACCOUNTS', 'with the registered source type');

done_testing();
