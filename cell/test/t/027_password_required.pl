# A role that is not a superuser makes the cell log in to the store only
# with a password the store asked for, as postgres_fdw requires: otherwise
# it could have the cell's connections authenticated by peer or trust as
# whatever role its user mapping names, a store superuser included. A
# superuser may waive that with password_required 'false' on the mapping
# (certificate authentication); no one else may.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_pw' ]);
# cell_pw logs in with a password; everything else is trusted
$store->safe_psql('postgres', q{ALTER ROLE cell_pw PASSWORD 'secret'});
my $hba = $store->data_dir . '/pg_hba.conf';
my $old = PostgreSQL::Test::Utils::slurp_file($hba);
open(my $fh, '>', $hba) or die "cannot write $hba: $!";
print $fh "local all cell_pw scram-sha-256\n$old";
close $fh;
$store->reload;

my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
$node->safe_psql('postgres', 'CREATE DATABASE cell1');
$node->safe_psql('cell1', sprintf(q{
CREATE EXTENSION claims_cell;
CREATE SERVER topology FOREIGN DATA WRAPPER claims_cell_store
  OPTIONS (host '%s', port '%d', dbname 'postgres');
CREATE USER MAPPING FOR PUBLIC SERVER topology OPTIONS (user 'cell_one');
SELECT claims_cell.configure(server_name => 'topology', cell_id => 1);
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE ROLE app LOGIN;
GRANT INSERT, SELECT ON users TO app;
GRANT USAGE ON FOREIGN SERVER topology TO app;
}, $store->host, $store->port));

my ($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (1, 'by-superuser')});
is($st, '00000', 'a superuser claims over a mapping without a password') or diag($err);

($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; INSERT INTO users VALUES (2, 'by-app')});
is($st, '2F003', 'another role does not: the mapping has no password');
like($err, qr/password is required/, 'saying so');

($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app;
CREATE USER MAPPING FOR app SERVER topology OPTIONS (user 'cell_one', password_required 'false')});
is($st, '42501', 'only a superuser may set password_required false');

# A mapping of its own with a password the store never asks for (trust).
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app;
CREATE USER MAPPING FOR app SERVER topology OPTIONS (user 'cell_one', password 'anything')});
is($st, '00000', 'a role with USAGE creates its own mapping with a password') or diag($err);
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; INSERT INTO users VALUES (3, 'by-trust')});
is($st, '2F003', 'the store did not ask for the password: refused');
like($err, qr/the store did not ask for it/, 'saying so');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value IN ('by-app', 'by-trust')}),
	'0', 'nothing was claimed by the refused logins');

# A password the store asks for works.
$node->safe_psql('cell1', q{ALTER USER MAPPING FOR app SERVER topology OPTIONS (SET user 'cell_pw', SET password 'secret')});
$node->safe_psql('cell1', q{SELECT claims_cell.configure('topology', 2)});
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; INSERT INTO users VALUES (4, 'by-password')});
is($st, '00000', 'a password the store asked for is accepted') or diag($err);
is($store->safe_psql('postgres', q{SELECT creator_id FROM claims WHERE bucket_value = 'by-password'}), '2',
	'and the value is claimed');

# A superuser waives the password for the PUBLIC mapping (certificates).
$node->safe_psql('cell1', q{
DROP USER MAPPING FOR app SERVER topology;
ALTER USER MAPPING FOR PUBLIC SERVER topology OPTIONS (ADD password_required 'false');
SELECT claims_cell.configure('topology', 1);
});
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app; INSERT INTO users VALUES (5, 'waived')});
is($st, '00000', 'with password_required false set by a superuser another role claims') or diag($err);

done_testing();
