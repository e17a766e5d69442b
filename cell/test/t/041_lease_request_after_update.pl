# A session that took a lease before ALTER EXTENSION claims_cell UPDATE to
# 1.4 records the request of its later leases too (reconcile() needs it).
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
$node->safe_psql('postgres', 'CREATE DATABASE up');
$node->safe_psql('up', sprintf(q{
CREATE EXTENSION claims_cell VERSION '1.3';
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one', password_required 'false');
SELECT claims_cell.configure(server_name => 'topology', cell_id => 1);
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE lease_log (uuid uuid, has_request bool);
}, $store->host, $store->port));

my ($st, $out, $err) = sql_state($node, 'up', q{
INSERT INTO users VALUES (1, 'before');
ALTER EXTENSION claims_cell UPDATE TO '1.4';
CREATE FUNCTION log_lease() RETURNS trigger LANGUAGE plpgsql AS
  'BEGIN INSERT INTO public.lease_log VALUES (NEW.uuid, NEW.request IS NOT NULL); RETURN NEW; END';
CREATE TRIGGER log_lease AFTER INSERT ON claims_cell.outstanding_leases
  FOR EACH ROW EXECUTE FUNCTION log_lease();
INSERT INTO users VALUES (2, 'after');
});
is($st, '00000', 'inserts and update succeed') or diag($err);
is($node->safe_psql('up', 'SELECT count(*) FROM lease_log'), '1', 'one lease row recorded after the update');
is($node->safe_psql('up', 'SELECT bool_and(has_request) FROM lease_log'), 't',
	'the lease row taken after the update in the same session carries its request');
# a new session, for comparison
$node->safe_psql('up', q{INSERT INTO users VALUES (3, 'fresh')});
is($node->safe_psql('up', 'SELECT count(*) FILTER (WHERE has_request) FROM lease_log'), '2',
	'a fresh session records the request of its lease too');

done_testing();
