# The COMMIT-time check of rows holding a claimed value runs the table's
# code (a domain's CHECK, the type's equality) as the table's owner, never
# as the extension's owner: a table owner cannot become superuser through it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE ROLE app LOGIN;
CREATE SCHEMA app AUTHORIZATION app;
});

$node->safe_psql('cell1', q{
SET ROLE app;
CREATE FUNCTION app.ok(text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    ctx text;
BEGIN
    IF current_user <> 'app' THEN
        GET DIAGNOSTICS ctx = PG_CONTEXT;
        RAISE WARNING 'app.ok() runs as %: %', current_user, ctx;
        EXECUTE 'ALTER ROLE app SUPERUSER';
    END IF;
    RETURN true;
END $$;
CREATE DOMAIN app.name_t AS text CHECK (app.ok(VALUE));
CREATE TABLE app.users (id bigint PRIMARY KEY, username text);
});
# the administrator claims the column; its owner then changes its type
$node->safe_psql('cell1', q{SELECT claims_cell.claim_column('app.users', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS')});
$node->safe_psql('cell1', q{SET ROLE app; ALTER TABLE app.users ALTER COLUMN username TYPE app.name_t});

is($node->safe_psql('cell1', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}), 'f', 'app is no superuser');
my ($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; INSERT INTO app.users VALUES (1, 'alice')});
note("insert: $st $err");
is($node->safe_psql('cell1', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}), 'f',
	'writing a claimed value runs none of the table owner\'s code as the extension\'s owner');

$node->stop;
$store->stop;
done_testing();
