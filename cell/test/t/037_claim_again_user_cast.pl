# reconcile() reads the claimed tables for lost values as each table's
# owner: a table owner's own type and cast to text never run with the
# rights of reconcile()'s caller (a superuser, or the worker).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
claims_cell.cleanup_after = 0
});
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE ROLE app LOGIN;
CREATE SCHEMA app AUTHORIZATION app;
SET ROLE app;
CREATE TABLE app.users (id bigint PRIMARY KEY, username text);
RESET ROLE;
SELECT claims_cell.claim_column('app.users', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');
});

$node->safe_psql('cell1', q{SET ROLE app; INSERT INTO app.users VALUES (1, 'alice')});
# the store loses the lease (an asynchronous failover)
$store->safe_psql('postgres', q{
SET session_replication_role = replica;
DELETE FROM claims WHERE creator_id = 1;
DELETE FROM claim_leases WHERE creator_id = 1;
});

# the table's owner gives the column a type of its own, cast to text by its own function
$node->safe_psql('cell1', q{
SET ROLE app;
CREATE TYPE app.name_t AS (v text);
CREATE FUNCTION app.as_text(app.name_t) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    IF current_user <> 'app' THEN
        EXECUTE 'ALTER ROLE app SUPERUSER';
    END IF;
    RETURN $1.v;
END $$;
CREATE CAST (app.name_t AS text) WITH FUNCTION app.as_text(app.name_t);
ALTER TABLE app.users ALTER COLUMN username TYPE app.name_t USING ROW(username)::app.name_t;
});
is($node->safe_psql('cell1', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}), 'f', 'app is no superuser');

my ($st, $out, $err) = sql_state($node, 'cell1', q{SELECT * FROM claims_cell.reconcile()});
note("reconcile: $st $out $err");
is($node->safe_psql('cell1', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'app'}), 'f',
	'reconcile() runs none of the table owner\'s functions with its caller\'s rights');

$node->stop;
$store->stop;
done_testing();
