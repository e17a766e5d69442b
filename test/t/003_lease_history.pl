# Lease history retention: the worker deletes finished leases older than
# claims.lease_history_retention in batches, never outstanding ones, and
# keeps everything when the retention is -1.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault qw(register_cells);

my $node = PostgreSQL::Test::Cluster->new('history');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'claims'
claims.report_interval = '1s'
claims.stale_lease_threshold = '1h'
claims.lease_history_retention = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($node, 1);

# Lease one username for cell 1; returns the lease uuid.
sub begin_lease
{
	my ($value) = @_;
	my $request = sprintf(
		'{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "%s"}, '
		  . '"subject": {"type": "USER", "id": 1}, '
		  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}',
		$value);
	return $node->safe_psql('postgres',
		"SELECT claims_begin_update('$request')->>'lease_uuid'");
}

sub set_and_reload
{
	my ($name, $value) = @_;
	my $from = -s $node->logfile;
	$node->safe_psql('postgres', "ALTER SYSTEM SET $name = '$value'");
	$node->safe_psql('postgres', 'SELECT pg_reload_conf()');
	# pg_reload_conf() only signals: wait until the postmaster has reloaded
	# (it signals the worker next), so that a sleep after this counts from
	# there and not from a reload still pending on a loaded machine
	$node->wait_for_log(qr/parameter "\Q$name\E" changed to "\Q$value\E"/, $from);
	return;
}

sub exists_lease
{
	my ($uuid) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM claim_leases WHERE uuid = '$uuid'");
}

my $committed = begin_lease('a');
$node->safe_psql('postgres', "SELECT claims_commit(1, '$committed')");
my $rolled_back = begin_lease('b');
$node->safe_psql('postgres', "SELECT claims_rollback(1, '$rolled_back')");
my $recent = begin_lease('c');
$node->safe_psql('postgres', "SELECT claims_commit(1, '$recent')");
my $outstanding = begin_lease('d');

# Backdate two finished leases and the outstanding one; add 2500 old
# finished leases (more than two batches) and 5 very old outstanding ones.
$node->safe_psql(
	'postgres', qq{
UPDATE claim_leases SET finished_at = now() - interval '2 hours'
 WHERE uuid IN ('$committed', '$rolled_back');
UPDATE claim_leases SET created_at = now() - interval '30 days'
 WHERE uuid = '$outstanding';
INSERT INTO claim_leases (uuid, creator_id, payload, state, claim_types,
                          claim_digests, created_at, updated_at, finished_at)
SELECT gen_random_uuid(), 2, '{}', s, '{}', '{}',
       now() - interval '40 days', now() - interval '40 days',
       CASE WHEN s = 'outstanding' THEN NULL ELSE now() - interval '39 days' END
FROM generate_series(1, 2505) AS i,
     LATERAL (SELECT (CASE WHEN i <= 5 THEN 'outstanding'
                           WHEN i % 2 = 0 THEN 'committed'
                           ELSE 'rolled_back' END)::claim_lease_state) AS st(s);
});

ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM claim_leases WHERE finished_at < now() - interval '1 hour'"),
	'finished leases past the retention are pruned');
is(exists_lease($committed), '0', 'old committed lease pruned');
is(exists_lease($rolled_back), '0', 'old rolled back lease pruned');
is(exists_lease($recent), '1', 'recent finished lease kept');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM claim_leases WHERE state = 'outstanding'"),
	'6',
	'outstanding leases kept, however old');

# A shorter retention prunes the recent one too, still no outstanding one.
set_and_reload('claims.lease_history_retention', '1s');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM claim_leases WHERE uuid = '$recent'"),
	'retention reloaded to 1s prunes the recent lease');
is( $node->safe_psql(
		'postgres', "SELECT count(*) FROM claim_leases WHERE state = 'outstanding'"),
	'6',
	'outstanding leases still kept');

# -1 keeps history forever.
set_and_reload('claims.lease_history_retention', '-1');
sleep 2;
my $kept = begin_lease('e');
$node->safe_psql('postgres', "SELECT claims_commit(1, '$kept')");
$node->safe_psql('postgres',
	"UPDATE claim_leases SET finished_at = now() - interval '1 year' WHERE uuid = '$kept'");
sleep 4;
is(exists_lease($kept), '1', 'retention -1 keeps finished leases');

unlike(slurp_file($node->logfile), qr/ERROR:/, 'no ERROR in the server log');

$node->stop;
done_testing();
