# The circuit breaker's shared count of calls in flight: a backend
# terminated while its call waits at the store gives its place back, and
# past claims_cell.max_concurrent_calls a call fails at once.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

# The store: claims preloaded, one login role per cell.
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);

# One cell whose calls may wait long at the store.
my $node = cell_node('cell', "claims_cell.call_timeout = '60s'\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

my @psql = ('psql', '-X', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port);

# Cell 2 leases a value in a store transaction left open: a begin_update
# of cell 1 for the same value waits behind it. Returns the session.
sub hold_at_store
{
	my ($value) = @_;
	my %s = (in => '', out => '', err => '');
	$s{h} = IPC::Run::start(
		[ 'psql', '-X', '-h', $store->host, '-p', $store->port, '-d', 'postgres' ],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err});
	$s{in} .= qq{BEGIN;
SET ROLE cell_two;
SELECT claims_begin_update('{"cell_id": 2, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": 99}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 99}}]}') IS NOT NULL AS held;
};
	$s{h}->pump until $s{out} =~ /\bt\b/;
	return \%s;
}

# End the store transaction of hold_at_store (rolled back).
sub release_at_store
{
	my ($s) = @_;
	$s->{in} .= "ROLLBACK;\n\\q\n";
	$s->{h}->finish;
}

# Start an INSERT of a claimed value in the cell, under an application name.
sub start_writer
{
	my ($name, $id, $value) = @_;
	my %w = (out => '', err => '');
	$w{h} = IPC::Run::start(
		[ @psql, '-d', "dbname=cell1 application_name=$name", '-c',
			"INSERT INTO users VALUES ($id, '$value')" ],
		'>', \$w{out}, '2>', \$w{err});
	return \%w;
}

# Wait until a cell backend of cell_one waits for a lock at the store.
sub wait_for_store_wait
{
	ok( $store->poll_query_until('postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity WHERE usename = 'cell_one' AND wait_event_type = 'Lock'}),
		'the cell\'s begin_update waits at the store');
}

# A terminated backend gives back its place in the in-flight count.
is($node->safe_psql('cell1', 'SELECT in_flight FROM claims_cell.stats'), '0', 'nothing in flight');
my $hold = hold_at_store('held');
my $w = start_writer('writer', 1, 'held');
wait_for_store_wait();
is($node->safe_psql('cell1', 'SELECT in_flight FROM claims_cell.stats'), '1',
	'the waiting call counts in flight');
is( $node->safe_psql('cell1', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	 WHERE application_name = 'writer'}), 't', 'terminate the waiting backend');
$w->{h}->finish;
like($w->{err}, qr/terminating connection due to administrator command/,
	'the writer was terminated');
ok( $node->poll_query_until('cell1', 'SELECT in_flight = 0 FROM claims_cell.stats'),
	'the in-flight count is back to 0');
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '0', 'the row was not kept');
is($node->safe_psql('cell1', 'SELECT count(*) FROM claims_cell.outstanding_leases'), '0',
	'and no local lease row');
release_at_store($hold);
is($node->safe_psql('cell1', 'SELECT breaker_state FROM claims_cell.stats'), 'closed',
	'the breaker stays closed');
is(system(@psql, '-d', 'cell1', '-c', q{INSERT INTO users VALUES (2, 'after')}), 0,
	'the next claim goes through');

# With the cap at 1, a second call fails fast instead of queueing.
$node->append_conf('postgresql.conf', "claims_cell.max_concurrent_calls = 1\n");
$node->reload;
# a reload only signals: wait until new sessions have the cap
$node->poll_query_until('cell1', q{SELECT current_setting('claims_cell.max_concurrent_calls') = '1'})
  or die 'the cap of 1 was not applied';
my $rejections = $node->safe_psql('cell1', 'SELECT breaker_rejections FROM claims_cell.stats');
$hold = hold_at_store('slow');
my $first = start_writer('first', 10, 'slow');
wait_for_store_wait();
my ($out, $err) = ('', '');
$node->psql('cell1', qq{\\set VERBOSITY verbose\nINSERT INTO users VALUES (11, 'fast')},
	stdout => \$out, stderr => \$err);
like($err, qr/ERROR:\s+08006: too many calls to the claims store at \S+ are in flight/,
	'the second call fails with 08006');
like($err, qr/DETAIL:\s+claims_cell.max_concurrent_calls is 1\./, 'the detail names the cap');
like($err, qr/HINT:\s+Nothing was claimed; retry later\./, 'the hint says what to do');
is( $store->safe_psql('postgres', q{
SELECT count(*) FROM pg_stat_activity WHERE usename = 'cell_one' AND wait_event_type = 'Lock'}),
	'1', 'at once: the first call still waits at the store');
is($node->safe_psql('cell1', 'SELECT breaker_rejections FROM claims_cell.stats'), $rejections + 1,
	'counted as a breaker rejection');
is($node->safe_psql('cell1', 'SELECT breaker_state FROM claims_cell.stats'), 'closed',
	'a full cap does not open the breaker');
release_at_store($hold);
$first->{h}->finish;
is($first->{err}, '', 'the first call commits once the store lets it');
is(system(@psql, '-d', 'cell1', '-c', q{INSERT INTO users VALUES (11, 'fast')}), 0,
	'the second succeeds on retry');
is($node->safe_psql('cell1', 'SELECT in_flight FROM claims_cell.stats'), '0', 'nothing in flight');

$node->stop;
$store->stop;
done_testing();
