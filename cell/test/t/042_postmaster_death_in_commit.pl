# The cell's postmaster dies (SIGKILL) while its backends wait on a frozen
# store: one claiming before the commit (a call that may be interrupted),
# one committing a repair lease in the commit callback (interrupts held).
# The first ends with the usual FATAL; the second gives its lease up and
# exits normally. Neither exits from inside the callback, which would run
# the abort callback of a committed transaction within the exit (rolling
# its lease back at the store) and call proc_exit() from it again. Once
# both servers run again reconcile() commits the lease.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use lib "$FindBin::RealBin/../../../test/perl";
use CellNodes;
use ClaimsFault qw(crash_node become_subreaper);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

become_subreaper();
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
$store->safe_psql('postgres',
	q{INSERT INTO claim_source_types (type_id, name) VALUES (41, 'RAILS_TABLE_R')});
my $node = cell_node('cell', "claims_cell.verify_interval = 0\nclaims_cell.database = 'cell1'\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE repairs (id bigint PRIMARY KEY, name text);
SELECT claims_cell.claim_column('repairs', 'name', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_R');
SET session_replication_role = replica;
INSERT INTO repairs VALUES (1, 'repaired-value');
RESET session_replication_role;
});

# Sessions whose calls wait up to 60 s, each with its store connection open.
my $ins = start_session($node, 'dbname=cell1 application_name=ins',
	"SET claims_cell.call_timeout = '60s';\nINSERT INTO users VALUES (1, 'warm');\nSELECT 'ins-ready';\n");
my $rep = start_session($node, 'dbname=cell1 application_name=rep',
	"SET claims_cell.call_timeout = '60s';\nBEGIN;\nSET LOCAL claims_cell.verify_recent = 0;\n"
	  . "SELECT 'repaired=' || repaired FROM claims_cell.verify('repairs', true);\n");
for my $s ($ins, $rep)
{
	$s->{h}->pump until $s->{out} =~ /ins-ready|repaired=/;
}
like($rep->{out}, qr/repaired=1/, 'verify() took a repair lease in the transaction');

# Freeze the store: its postmaster, then its children.
my $pm = $store->{_pid};
kill 'STOP', $pm;
my @frozen = ($pm, grep { /^\d+$/ } split /\s+/, `pgrep -P $pm`);
kill 'STOP', @frozen;
END { kill 'CONT', @frozen if @frozen; }

$ins->{in} .= "INSERT INTO users VALUES (2, 'frozen');\n";
$rep->{in} .= "COMMIT;\n";
$_->{h}->pump_nb for $ins, $rep;

# Both backends wait in the extension.
my $waiting = '';
for (1 .. 200)
{
	$waiting = $node->safe_psql('cell1', q{
SELECT string_agg(application_name, ',' ORDER BY application_name) FROM pg_stat_activity
 WHERE application_name IN ('ins', 'rep') AND wait_event_type = 'Extension'});
	last if $waiting eq 'ins,rep';
	usleep(50_000);
}
is($waiting, 'ins,rep', 'the claiming INSERT and the COMMIT wait on the frozen store');

crash_node($node);
for my $s ($ins, $rep)
{
	eval { $s->{h}->finish; 1 };
}
like($ins->{err}, qr/FATAL:\s+57P01: terminating connection due to unexpected postmaster exit/,
	'the claiming INSERT ends with the FATAL of a postmaster gone');
like($rep->{err}, qr/WARNING:\s+01000: claims_cell: could not commit lease/,
	'the COMMIT gives its lease up with a warning')
  or diag($rep->{err});

my $log = slurp_file($node->logfile);
unlike($log, qr/AbortTransaction while in COMMIT state/,
	'no committed transaction was aborted in the exit');
unlike($log, qr/PANIC:|TRAP:/, 'no PANIC, no assertion failed');

# Both servers again: the lease left to the worker is committed.
kill 'CONT', @frozen;
@frozen = ();
$node->start;
my $left = '';
for (1 .. 60)
{
	# a pass may fail while the breaker the outage opened cools down
	$node->psql('cell1', q{
SET claims_cell.stale_after = 0;
SELECT count(*) FROM claims_cell.reconcile(true);
SELECT count(*) FROM claims_cell.outstanding_leases}, stdout => \$left);
	last if $left =~ /\n0$/;
	sleep(1);
}
like($left, qr/\n0$/, 'reconcile() finishes the lease left');
is($store->safe_psql('postgres', q{
SELECT count(*) FROM claims WHERE bucket_value = 'repaired-value' AND creator_id = 1}),
	'1', 'the repaired value is claimed: its lease was committed, not rolled back');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE username = 'frozen'}),
	'0', 'the INSERT whose backend exited did not commit');

$node->stop;
$store->stop;
done_testing();
