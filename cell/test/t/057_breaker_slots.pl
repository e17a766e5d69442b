# The breaker's shared slots (64, one per database) are never taken from a
# database whose calls depend on them: reading claims_cell.stats in many
# other databases (as a monitoring scrape does) takes no slot at all, and
# the calls of more databases than there are free slots take only slots
# with nothing in flight, no open or half-open breaker and no failures
# counting. Before, any slot with nothing in flight was taken and zeroed:
# an open breaker among them, whose backends then hammered the dead store
# host again.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $slots = 64;
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
# A breaker that stays open for the whole test once opened: no early
# probes, an hour of cooldown, so nothing but a stolen slot closes it.
my $node = cell_node('cells', "claims_cell.breaker_threshold = 2\nclaims_cell.breaker_cooldown = '1h'\n"
	  . "claims_cell.breaker_probe_interval = 0\nmax_connections = 40\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

sub breaker
{
	my ($db) = @_;
	return $node->safe_psql($db, 'SELECT breaker_state FROM claims_cell.stats');
}

# Open cell 1's breaker: its store host refuses connections.
my $dead = PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql('cell1', "ALTER SERVER topology OPTIONS (SET port '$dead')");
for my $i (1, 2)
{
	my ($st) = sql_state($node, 'cell1', "INSERT INTO users VALUES ($i, 'down$i')");
	is($st, '08006', "call $i fails: the store host is down");
}
is(breaker('cell1'), 'open', 'cell 1\'s breaker is open');

# More databases than slots read their statistics.
$node->safe_psql('postgres', 'CREATE DATABASE rtmpl');
$node->safe_psql('rtmpl', 'CREATE EXTENSION claims_cell');
my $states = '';
for my $i (1 .. $slots + 6)
{
	$node->safe_psql('postgres', "CREATE DATABASE r$i TEMPLATE rtmpl");
	$states .= breaker("r$i") . "\n";
}
is(scalar(() = $states =~ /^closed$/mg), $slots + 6, 'each reads a closed breaker and zero counts');
is(breaker('cell1'), 'open', 'cell 1\'s breaker is still open after the scrape of 70 databases');
my ($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (3, 'down3')});
is($st, '08006', 'and it still fails calls at once');
like($err, qr/circuit breaker/i, 'as an open breaker');

# More databases than slots call the store: each a copy of a configured
# cell, configured again as cell 2, claiming one value.
add_cell(node => $node, store => $store, db => 'wtmpl', cell_id => 2, role => 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
my $ok = 0;
for my $i (1 .. $slots + 2)
{
	$node->safe_psql('postgres', "CREATE DATABASE w$i TEMPLATE wtmpl");
	($st, $out, $err) = sql_state($node, "w$i", qq{
SELECT claims_cell.configure('topology', 2);
INSERT INTO users VALUES ($i, 'w$i');});
	$ok++ if $st eq '00000';
	diag("w$i: $err") if $st ne '00000';
}
is($ok, $slots + 2, 'every one of 66 databases claims (those past the table count alone)');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'w%' AND creator_id = 2 AND status = 'ACTIVE'}),
	$slots + 2, 'all of them at the store');
is(breaker('cell1'), 'open', 'cell 1\'s breaker is still open: its slot was not taken');

# The breaker still closes the ordinary way once the store answers: a
# probe (early probes switched on again) reaches it.
$node->safe_psql('cell1', sprintf(q{ALTER SERVER topology OPTIONS (SET port '%d')}, $store->port));
$node->safe_psql('cell1', q{ALTER SYSTEM SET claims_cell.breaker_probe_interval = '10ms'; SELECT pg_reload_conf();});
$node->poll_query_until('cell1', q{SELECT breaker_state <> 'open' FROM claims_cell.stats})
  or die 'the breaker never left open after the reload';
($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (4, 'up4')});
is($st, '00000', 'the probe reaches the store') or diag($err);
is(breaker('cell1'), 'closed', 'and closes the breaker');

done_testing();
