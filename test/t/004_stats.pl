# claims_stats: every counter moves exactly as a scripted sequence of calls
# says, errors included, in the totals, per cell (claims_stats_by_cell:
# the calls whose request named a registered cell) and per bucket type
# (claims_stats_by_bucket_type: values); reset and privileges;
# claims_oldest_leases finds each cell's oldest outstanding lease through
# the outstanding leases' index; and without shared_preload_libraries the
# store works while claims_stats fails 55000.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault qw(register_cells);

my @counters = qw(begin_updates claims_created claims_destroyed claims_replaced
  commits rollbacks repeated_commits repeated_rollbacks conflicts_permanent
  conflicts_temporary malformed_requests ownership_violations not_found);

# SQLSTATE of a statement, '00000' when it succeeds.
my $sqlstate_of = q{
CREATE FUNCTION sqlstate_of(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN '00000';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
};

# A metadata entry for USERNAMES value $value.
sub record
{
	my ($value, $subject) = @_;
	$subject //= 1;
	return sprintf(
		'{"bucket": {"type": "USERNAMES", "value": "%s"}, '
		  . '"subject": {"type": "USER", "id": %d}, '
		  . '"source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}',
		$value, $subject);
}

# A begin_update request.
sub request
{
	my ($cell, $creates, $destroys, $lease) = @_;
	my $r = sprintf('{"cell_id": %d, "create_records": [%s], "destroy_records": [%s]',
		$cell, join(', ', @$creates), join(', ', @$destroys));
	$r .= qq{, "lease_uuid": "$lease"} if defined $lease;
	return "$r}";
}

my $node = PostgreSQL::Test::Cluster->new('stats');
$node->init;
$node->append_conf(
	'postgresql.conf', q{
shared_preload_libraries = 'claims'
claims.report_interval = '1h'
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($node, 1, 2, 3, 9);
$node->safe_psql('postgres', $sqlstate_of);

my %expected = map { $_ => 0 } @counters;
my @cells = (1, 2, 3, 4, 9);
my %cell_expected = map { my $c = $_; $c => { map { $_ => 0 } @counters } } @cells;

# Every cell's counters in claims_stats_by_cell, "cell:c1,c2,...;" (zeros
# for a cell without a row).
sub cell_counters
{
	return $node->safe_psql('postgres',
		'SELECT string_agg(c || \':\' || concat_ws(\',\', '
		  . join(', ', map { "coalesce(s.$_, 0)" } @counters)
		  . "), ';' ORDER BY c) FROM unnest('{" . join(',', @cells) . "}'::bigint[]) c"
		  . ' LEFT JOIN claims_stats_by_cell s ON s.cell_id = c');
}

sub cell_expectation
{
	return join(';',
		map { my $c = $_; "$c:" . join(',', map { $cell_expected{$c}{$_} } @counters) } @cells);
}

# Run one step and check every counter against the expectation; the moves
# count for the cell named by "cell" too, when given.
sub step
{
	my ($label, $sql, $want_state, %moves) = @_;
	my $cell = delete $moves{cell};
	my $quoted = $sql =~ s/'/''/gr;
	my $state = $node->safe_psql('postgres', "SELECT sqlstate_of('$quoted')");
	is($state, $want_state, "$label: SQLSTATE $want_state");
	$expected{$_} += $moves{$_} for keys %moves;
	if (defined $cell)
	{
		$cell_expected{$cell}{$_} += $moves{$_} for keys %moves;
	}
	my $got = $node->safe_psql('postgres',
		'SELECT ' . join(q{ || ',' || }, @counters) . ' FROM claims_stats');
	is($got, join(',', map { $expected{$_} } @counters), "$label: counters");
	is(cell_counters(), cell_expectation(), "$label: counters per cell");
	# every value of the sequence is a USERNAMES one, and every conflict has
	# one value at fault: the type's counts are the totals'
	is( $node->safe_psql('postgres',
			q{SELECT concat_ws(',', values_created, values_destroyed, values_replaced,
			                   conflicts_permanent, conflicts_temporary)
			    FROM claims_stats_by_bucket_type WHERE bucket_type_name = 'USERNAMES'}),
		join(',', map { $expected{$_} } qw(claims_created claims_destroyed claims_replaced
			  conflicts_permanent conflicts_temporary)),
		"$label: counters of the bucket type");
	return;
}

# Reset, then everything is zero.
my $warmup = $node->safe_psql('postgres',
	'SELECT claims_begin_update(\'' . request(9, [ record('warmup') ], []) . '\') ->> \'lease_uuid\'');
my $before = $node->safe_psql('postgres', 'SELECT stats_reset FROM claims_stats');
$node->safe_psql('postgres', 'SELECT claims_stats_reset()');
is( $node->safe_psql(
		'postgres',
		'SELECT ' . join(' + ', @counters) . ", stats_reset > '$before' FROM claims_stats"),
	'0|t',
	'reset: every counter zero, reset time moved');
is( $node->safe_psql('postgres',
		'SELECT ' . join(' + ', @counters) . ' FROM claims_stats_by_cell WHERE cell_id = 9'),
	'0', 'reset: the counters of the cell counted before are zero too');
is( $node->safe_psql('postgres',
		q{SELECT values_created + values_destroyed + values_replaced + conflicts_permanent
		         + conflicts_temporary FROM claims_stats_by_bucket_type}),
	'0', 'reset: and those of its bucket type');

my $l1 = '01900000-0000-7000-8000-000000000001';
my $l2 = '01900000-0000-7000-8000-000000000002';
my $l3 = '01900000-0000-7000-8000-000000000003';
my $l4 = '01900000-0000-7000-8000-000000000004';
my $r4 = request(3, [ record('u4') ], [], $l4);

step('begin creating two', "SELECT claims_begin_update('" . request(1, [ record('u1'), record('u2') ], [], $l1) . "')",
	'00000', cell => 1, begin_updates => 1, claims_created => 2);
step('commit', "SELECT claims_commit(1, '$l1')", '00000', cell => 1, commits => 1);
step('repeated commit', "SELECT claims_commit(1, '$l1')", '00000', cell => 1, repeated_commits => 1);
step('begin replacing one and destroying one',
	"SELECT claims_begin_update('" . request(1, [ record('u1', 2) ], [ record('u1'), record('u2') ], $l2) . "')",
	'00000', cell => 1, begin_updates => 1, claims_replaced => 1, claims_destroyed => 1);
step('rollback', "SELECT claims_rollback(1, '$l2')", '00000', cell => 1, rollbacks => 1);
step('repeated rollback', "SELECT claims_rollback(1, '$l2')", '00000', cell => 1, repeated_rollbacks => 1);
step('permanent conflict', "SELECT claims_begin_update('" . request(2, [ record('u1') ], []) . "')",
	'23505', cell => 2, begin_updates => 1, conflicts_permanent => 1);
step('begin creating one', "SELECT claims_begin_update('" . request(1, [ record('u3') ], [], $l3) . "')",
	'00000', cell => 1, begin_updates => 1, claims_created => 1);
step('temporary conflict', "SELECT claims_begin_update('" . request(2, [ record('u3') ], []) . "')",
	'55P03', cell => 2, begin_updates => 1, conflicts_temporary => 1);
step('malformed request', q{SELECT claims_begin_update('{"cell_id": 1, "bogus": 1}')},
	'22023', begin_updates => 1, malformed_requests => 1);
step('malformed cell id', "SELECT claims_commit(0, '$l3')", '22023', malformed_requests => 1);
step('ownership violation', "SELECT claims_commit(2, '$l3')", '42501', cell => 2, ownership_violations => 1);
step('destroy of another cell\'s value', "SELECT claims_begin_update('" . request(2, [], [ record('u1') ]) . "')",
	'42501', cell => 2, begin_updates => 1, ownership_violations => 1);
step('unknown lease', "SELECT claims_commit(1, '01900000-0000-7000-8000-0000000000ff')",
	'P0002', cell => 1, not_found => 1);
step('destroy of an unclaimed value', "SELECT claims_begin_update('" . request(1, [], [ record('nobody') ]) . "')",
	'P0002', cell => 1, begin_updates => 1, not_found => 1);
step('begin with a lease uuid', "SELECT claims_begin_update('$r4')", '00000',
	cell => 3, begin_updates => 1, claims_created => 1);
step('identical retry', "SELECT claims_begin_update('$r4')", '00000', cell => 3, begin_updates => 1);
step('commit of a rolled back lease', "SELECT claims_commit(1, '$l2')", '55000');
# A cell nobody registered is refused (42501) as soon as its cell_id is read:
# the call counts as a begin_update, but it touches nobody's value or lease,
# so it is no ownership violation.
step('begin for an unregistered cell', "SELECT claims_begin_update('" . request(4, [ record('u5') ], []) . "')",
	'42501', begin_updates => 1);
step('commit for an unregistered cell', "SELECT claims_commit(4, '$l3')", '42501');

# One batch of two types, and a refused one with two values at fault of
# each kind: counted per type, per value.
$node->safe_psql('postgres', 'SELECT claims_stats_reset()');
my $email = '{"bucket": {"type": "EMAILS", "value": "%s"}, "subject": {"type": "USER", "id": 1}, '
  . '"source": {"type": "RAILS_TABLE_EMAILS", "rails_primary_key_id": 1}}';
my $mixed = request(1, [ record('m1'), record('m2'), sprintf($email, 'e1') ], []);
$node->safe_psql('postgres', "SELECT claims_begin_update('$mixed')");
# cell 2 meets u1 (cell 1's, committed: 23505), m1 and e1 (under cell 1's
# lease just taken: 55P03); the call fails with the most fundamental, 23505
is( $node->safe_psql('postgres',
		"SELECT sqlstate_of('SELECT claims_begin_update(''"
		  . request(2, [ record('u1'), record('m1'), sprintf($email, 'e1') ], []) . "'')')"),
	'23505', 'a refused batch of two types');
is( $node->safe_psql('postgres',
		q{SELECT string_agg(concat_ws(',', bucket_type_name, values_created, values_destroyed,
		                              values_replaced, conflicts_permanent, conflicts_temporary), ';'
		                    ORDER BY bucket_type)
		    FROM claims_stats_by_bucket_type}),
	'USERNAMES,2,0,0,1,1;EMAILS,1,0,0,0,1',
	'values per bucket type: created per type, and each value at fault by its own conflict');

# Privileges: the reset and the stale lease view are not PUBLIC; monitoring
# roles read the statistics.
$node->safe_psql('postgres', 'CREATE ROLE plain; CREATE ROLE monitor IN ROLE pg_monitor');
is( $node->safe_psql(
		'postgres', q{SET ROLE plain;
SELECT sqlstate_of('SELECT * FROM claims_stats'), sqlstate_of('SELECT claims_stats_reset()'),
       sqlstate_of('SELECT * FROM claims_stale_leases')}),
	'42501|42501|42501',
	'PUBLIC reads neither statistics nor stale leases, and cannot reset');
is( $node->safe_psql(
		'postgres', q{SET ROLE monitor;
SELECT sqlstate_of('SELECT * FROM claims_stats'), sqlstate_of('SELECT claims_stats_reset()')}),
	'00000|42501',
	'pg_monitor reads the statistics but cannot reset them');
is( $node->safe_psql(
		'postgres', q{SET ROLE plain;
SELECT sqlstate_of('SELECT * FROM claims_stats_by_cell'), sqlstate_of('SELECT * FROM claims_oldest_leases'),
       sqlstate_of('SELECT * FROM claims_stats_by_bucket_type')}),
	'42501|42501|42501',
	'PUBLIC reads neither the statistics per cell or bucket type nor the oldest leases');
is( $node->safe_psql(
		'postgres', q{SET ROLE monitor;
SELECT sqlstate_of('SELECT * FROM claims_stats_by_cell'), sqlstate_of('SELECT * FROM claims_oldest_leases'),
       sqlstate_of('SELECT * FROM claims_stats_by_bucket_type')}),
	'00000|00000|00000',
	'pg_monitor reads the statistics per cell and bucket type and the oldest leases');

# claims_oldest_leases: the oldest outstanding lease of every registered
# cell, found through claim_leases_outstanding_idx even among 200 000
# finished leases and 20 000 outstanding ones of another cell.
is( $node->safe_psql(
		'postgres', q{SET ROLE monitor;
SELECT string_agg(cell_id || ' ' || coalesce(lease_uuid::text, '-') || ' ' || (age > '0'), ', ' ORDER BY cell_id)
  FROM claims_oldest_leases}),
	"1 $l3 true, 2 - false, 3 $l4 true, 9 $warmup true",
	'each cell\'s oldest outstanding lease (the others have none, age 0)');
$node->safe_psql('postgres', q{
INSERT INTO claim_leases (uuid, creator_id, payload, state, claim_types, claim_digests, finished_at)
SELECT gen_random_uuid(), 1 + i % 3, '{}', CASE WHEN i % 11 = 0 THEN 'outstanding'::claim_lease_state ELSE 'committed' END,
       '{}', '{}', CASE WHEN i % 11 = 0 THEN NULL ELSE now() END
  FROM generate_series(1, 220000) i;
ANALYZE claim_leases;
});
my $plan = $node->safe_psql('postgres', 'SET ROLE monitor; EXPLAIN SELECT * FROM claims_oldest_leases');
note($plan);
like($plan, qr/claim_leases_outstanding_idx/, 'claims_oldest_leases probes the outstanding leases\' index');
unlike($plan, qr/Seq Scan on claim_leases/, 'and scans no lease table');
is( $node->safe_psql('postgres', q{SELECT lease_uuid FROM claims_oldest_leases WHERE cell_id = 1}),
	$l3, 'the oldest lease is still the oldest');
$node->stop;

# Without shared_preload_libraries (overriding any TEMP_CONFIG).
my $bare = PostgreSQL::Test::Cluster->new('bare');
$bare->init;
$bare->append_conf('postgresql.conf', "shared_preload_libraries = ''");
$bare->start;
$bare->safe_psql('postgres', 'CREATE EXTENSION claims');
register_cells($bare, 1);
$bare->safe_psql('postgres', $sqlstate_of);
is( $bare->safe_psql(
		'postgres',
		"SELECT claims_begin_update('" . request(1, [ record('x') ], []) . "') ->> 'cell_id'"),
	'1',
	'without preload the store works');
is( $bare->safe_psql(
		'postgres',
		q{SELECT sqlstate_of('SELECT * FROM claims_stats'), sqlstate_of('SELECT claims_stats_reset()')}),
	'55000|55000',
	'without preload claims_stats and claims_stats_reset fail with 55000');
my ($ret, $stdout, $stderr) = $bare->psql('postgres', 'SELECT * FROM claims_stats');
like($stderr, qr/HINT:  Add claims to shared_preload_libraries and restart the server\./,
	'the error hints at shared_preload_libraries');
$bare->safe_psql('postgres',
	"UPDATE claim_leases SET created_at = now() - interval '11 minutes'");
is($bare->safe_psql('postgres', 'SELECT count(*) FROM claims_stale_leases'),
	'1', 'claims_stale_leases uses the default threshold before the library is loaded');
is( $bare->safe_psql(
		'postgres', q{SELECT claims_get_record('{"claim": {"username": "x"}}') IS NOT NULL;
SHOW claims.stale_lease_threshold}),
	"t\n10min",
	'the setting exists once the library is loaded');
is( $bare->safe_psql(
		'postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'claims stale lease reporter'"),
	'0',
	'no worker without preload');
$bare->stop;

done_testing();
