# One connection to the store per user mapping, kept while the backend
# lives (as postgres_fdw keeps them): a backend whose roles take turns at
# claiming does not reconnect at every turn, roles sharing the PUBLIC
# mapping share its connection, and ALTER USER MAPPING makes the kept
# connection of that mapping reconnect with the new options.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
$store->append_conf('postgresql.conf', "log_connections = on\n");
$store->reload;
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE ROLE alice; CREATE ROLE bob; CREATE ROLE carol;
GRANT INSERT ON users TO alice, bob, carol;
CREATE USER MAPPING FOR alice SERVER topology OPTIONS (user 'cell_one', password_required 'false');
});

# Logins of the cell at the store since a log offset.
sub logins_since
{
	my ($offset) = @_;
	my $log = slurp_file($store->logfile, $offset);
	my @n = $log =~ /connection authorized: user=cell_one/g;
	return scalar @n;
}

my $offset = -s $store->logfile;
my $script = '';
for my $i (1 .. 10)
{
	$script .= "SET ROLE alice; INSERT INTO users VALUES ($i, 'a$i'); RESET ROLE;\n";
	$script .= "SET ROLE bob; INSERT INTO users VALUES (" . (100 + $i) . ", 'b$i'); RESET ROLE;\n";
	$script .= "SET ROLE carol; INSERT INTO users VALUES (" . (200 + $i) . ", 'c$i'); RESET ROLE;\n";
}
my ($st, $out, $err) = sql_state($node, 'cell1', $script);
is($st, '00000', 'three roles take turns claiming, ten rounds') or diag($err);
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status = 'ACTIVE'}), '30',
	'every value is claimed');
is(logins_since($offset), 2,
	'two logins at the store: one for alice\'s mapping, one for the PUBLIC mapping bob and carol share');

# In the same backend: a changed mapping is used at once, its kept
# connection is not.
$offset = -s $store->logfile;
($st, $out, $err) = sql_state($node, 'cell1', $script =~ s/VALUES \((\d+), '(\w)(\d+)'\)/VALUES (1000 + $1, 'x$2$3')/gr . q{
ALTER USER MAPPING FOR alice SERVER topology OPTIONS (SET user 'nobody_at_the_store');
SET ROLE bob; INSERT INTO users VALUES (5000, 'still-bob'); RESET ROLE;
SET ROLE alice; INSERT INTO users VALUES (5001, 'new-alice');
});
isnt($st, '00000', 'after ALTER USER MAPPING the kept connection of that mapping is not used');
like($err, qr/nobody_at_the_store/, 'the new options are: the store refuses the new user');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'still-bob'}), '1',
	'the other mapping works on');
is(logins_since($offset), 3,
	'two logins for the rounds, one for the PUBLIC mapping after the change marked it stale');

done_testing();
