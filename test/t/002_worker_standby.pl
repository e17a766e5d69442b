# The stale lease reporter on a hot standby: it runs, writes and notifies
# nothing, logs no errors, and starts working when the standby is promoted.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault qw(register_cells);

my $worker = 'claims stale lease reporter';

# Lines reporting errors, less the walreceiver's exit at promotion.
sub error_lines
{
	my ($node) = @_;
	return join('',
		grep { !/terminating walreceiver process due to administrator command/ }
		  grep { /(ERROR|FATAL|PANIC):/ } split(/^/m, slurp_file($node->logfile)));
}

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'claims'
claims.stale_lease_threshold = '2s'
claims.report_interval = '1s'
claims.lease_history_retention = '1s'
});
$primary->start;
$primary->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($primary, 5);

$primary->backup('backup');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->start;

# One outstanding lease (stale soon) and one finished lease past retention.
my $request =
    '{"cell_id": 5, "create_records": [{"bucket": {"type": "USERNAMES", "value": "%s"}, '
  . '"subject": {"type": "USER", "id": 1}, '
  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}';
my $lease = $primary->safe_psql('postgres',
	"SELECT claims_begin_update('" . sprintf($request, 'dana') . "')->>'lease_uuid'");
$primary->wait_for_log(qr/WARNING:  claims: cell 5 has 1 stale lease; the oldest, \Q$lease\E/);
$primary->wait_for_catchup($standby);

ok( $standby->poll_query_until(
		'postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = '$worker'"),
	'worker runs on the standby');
my $waiting = qr/claims: the server is a hot standby; stale lease reports and lease history pruning wait for promotion/;
$standby->wait_for_log($waiting);
sleep 3;

my $log = slurp_file($standby->logfile);
my $n = () = $log =~ /$waiting/g;
is($n, 1, 'the standby line is logged once');
unlike($log, qr/claims: cell \d+ has/, 'no stale lease reports on the standby');
is(error_lines($standby), '', 'no errors in the standby log');
is( $standby->safe_psql(
		'postgres', "SELECT count(*) FROM claims_stale_leases WHERE lease_uuid = '$lease'"),
	'1',
	'claims_stale_leases answers on the standby');
is($standby->safe_psql('postgres', 'SELECT worker_last_run IS NULL FROM claims_stats'),
	't', 'the standby worker has not run a cycle');

# After promotion the worker starts working on the promoted server.
my $offset = -s $standby->logfile;
$standby->promote;
$standby->wait_for_log(
	qr/claims: the server was promoted; stale lease reports and lease history pruning start/, $offset);
$standby->wait_for_log(qr/WARNING:  claims: cell 5 has 1 stale lease; the oldest, \Q$lease\E/,
	$offset);
pass('the promoted server reports the stale lease');

# ... and prunes history there.
$standby->safe_psql('postgres', "SELECT claims_rollback(5, '$lease')");
ok( $standby->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM claim_leases WHERE uuid = '$lease'"),
	'the promoted server prunes finished leases');
is(error_lines($standby), '', 'no errors in the promoted server log');

$standby->stop;
$primary->stop;
done_testing();
