# Prometheus end to end: a real prometheus-postgres-exporter with
# monitoring/queries-store.yaml scrapes a store, another with
# queries-cell.yaml a cell's database, both as a role that is only a member
# of pg_monitor, while the cell claims, conflicts and reconciles; every
# counter scraped must equal what the test did. A real Prometheus server
# scrapes both exporters every second with monitoring/recording.yml and
# alerts.yml: a lease left outstanding on purpose raises ClaimsStaleLeases
# and ClaimsOldestLeaseTooOld for its cell only, and reconcile() passes that
# fail raise ClaimsCellReconcileFailing; a stopped store makes
# ClaimsStoreUnreachable pending. Loopback only.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../../../cell/test/perl";
use CellNodes;
use HTTP::Tiny;
use IPC::Run ();
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);

my $mon = "$FindBin::RealBin/../..";
for my $bin (qw(prometheus-postgres-exporter prometheus))
{
	BAIL_OUT("$bin is not installed (scripts/deps.sh installs it)")
	  unless grep { -x "$_/$bin" } split /:/, "$ENV{PATH}:/usr/bin:/usr/sbin";
}

# The store: the reporter runs every second, leases are stale after 3 s.
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
$store->append_conf('postgresql.conf', qq{
claims.stale_lease_threshold = 3
claims.report_interval = 1
});
$store->reload;

# The cell: its worker reconciles every second and settles leases 3 s old
# (a commit callback is never that late, so only the lost lease below is
# reconcile()'s).
my $node = cell_node('cell', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1s'
claims_cell.stale_after = 3
claims_cell.cleanup_after = 0
claims_cell.breaker_threshold = 1000
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text UNIQUE);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# The exporters log in as a role that is only a member of pg_monitor.
$store->safe_psql('postgres', 'CREATE ROLE prom LOGIN IN ROLE pg_monitor');
$node->safe_psql('postgres', 'CREATE ROLE prom LOGIN IN ROLE pg_monitor');

my $tmp = PostgreSQL::Test::Utils::tempdir();
my @procs;

# Start a long-running program on loopback; its output goes to a file in
# the log directory. It runs under timeout(1): should this script be killed
# before its END block, the program still ends within 10 minutes.
sub start_program
{
	my ($name, $cmd, %env) = @_;
	my $log = "$PostgreSQL::Test::Utils::log_path/$name.log";
	local @ENV{ keys %env } = values %env;
	my $h = IPC::Run::start([ 'timeout', '600', @$cmd ], '<', \undef, '>', $log, '2>&1');
	push @procs, $h;
	return $h;
}

END
{
	for my $h (@procs)
	{
		eval { $h->signal('TERM'); $h->finish; 1 } or eval { $h->kill_kill };
	}
}

# Start an exporter of one node's database with one queries file; returns its URL.
sub start_exporter
{
	my ($name, $node, $db, $queries) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	start_program($name,
		[ 'prometheus-postgres-exporter', "--web.listen-address=127.0.0.1:$port",
			"--extend.query-path=$mon/$queries", '--disable-default-metrics',
			'--disable-settings-metrics' ],
		DATA_SOURCE_NAME => sprintf('host=%s port=%d dbname=%s user=prom sslmode=disable',
			$node->host, $node->port, $db));
	return "http://127.0.0.1:$port/metrics";
}

my $http = HTTP::Tiny->new(timeout => 10);

# GET a URL, retrying for up to 30 s while the server starts.
sub http_get
{
	my ($url) = @_;
	my $deadline = time + 30;
	while (1)
	{
		my $r = $http->get($url);
		return $r->{content} if $r->{success};
		die "GET $url: $r->{status} $r->{content}" if time > $deadline;
		usleep(200_000);
	}
}

# The samples of an exposition: [name, {labels}, value].
sub samples
{
	my ($text) = @_;
	my @s;
	for my $line (split /\n/, $text)
	{
		next if $line =~ /^#/ || $line !~ /\S/;
		my ($name, $labels, $value) = $line =~ /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/
		  or next;
		my %l = ($labels // '') =~ /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
		push @s, [ $name, \%l, $value ];
	}
	return \@s;
}

# The value of the one sample of name whose labels include the given ones
# (undef when none; dies when several match).
sub value
{
	my ($samples, $name, %want) = @_;
	my @m = grep {
		my $s = $_;
		$s->[0] eq $name && !grep { ($s->[1]{$_} // "\0") ne $want{$_} } keys %want
	} @$samples;
	die "several samples of $name match" if @m > 1;
	return @m ? $m[0][2] + 0 : undef;
}

my $store_url = start_exporter('exporter_store', $store, 'postgres', 'queries-store.yaml');
my $cell_url = start_exporter('exporter_cell', $node, 'cell1', 'queries-cell.yaml');

# Prometheus: both exporters every second, the project's rules every second.
my $prom_port = PostgreSQL::Test::Cluster::get_free_port();
my ($store_target) = $store_url =~ m{//([^/]+)/};
my ($cell_target) = $cell_url =~ m{//([^/]+)/};
open my $fh, '>', "$tmp/prometheus.yml" or die $!;
print $fh <<"EOC";
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - $mon/recording.yml
  - $mon/alerts.yml
scrape_configs:
  - job_name: claims_store
    static_configs:
      - targets: ['$store_target']
  - job_name: claims_cell
    static_configs:
      - targets: ['$cell_target']
EOC
close $fh;
start_program('prometheus',
	[ 'prometheus', "--config.file=$tmp/prometheus.yml", "--storage.tsdb.path=$tmp/tsdb",
		"--web.listen-address=127.0.0.1:$prom_port" ]);
my $api = "http://127.0.0.1:$prom_port/api/v1";

# A Prometheus API call's data.
sub prom
{
	my ($path) = @_;
	my $r = decode_json(http_get("$api/$path"));
	die "Prometheus: $path: " . ($r->{error} // 'failed') unless $r->{status} eq 'success';
	return $r->{data};
}

# The value of an instant query's only series, or undef.
sub prom_value
{
	my ($query) = @_;
	my $d = prom('query?query=' . uri_escape($query));
	return @{ $d->{result} } == 1 ? $d->{result}[0]{value}[1] + 0 : undef;
}

sub uri_escape
{
	my ($s) = @_;
	$s =~ s/([^A-Za-z0-9\-_.~])/sprintf('%%%02X', ord $1)/ge;
	return $s;
}

# The alerts in a state (firing, pending) as "name cell_id" strings.
sub alerts
{
	my ($state) = @_;
	return sort map { "$_->{labels}{alertname} " . ($_->{labels}{cell_id} // '-') }
	  grep { $_->{state} eq $state } @{ prom('alerts')->{alerts} };
}

# Poll (at most 60 s) until code returns true.
sub poll
{
	my ($code) = @_;
	my $deadline = time + 60;
	while (time < $deadline)
	{
		my $ok = eval { $code->() };
		return 1 if $ok;
		usleep(250_000);
	}
	return 0;
}

# A lease taken at the store directly for a cell; returns its uuid.
sub store_begin
{
	my ($cell, $value, $id) = @_;
	my $role = $cell == 1 ? 'cell_one' : 'cell_two';
	return $store->safe_psql('postgres', qq{
SET ROLE $role;
SELECT claims_begin_update('{"cell_id": $cell, "create_records": [{"bucket": {"type": "USERNAMES", "value": "$value"}, "subject": {"type": "USER", "id": $id}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": $id}}]}') ->> 'lease_uuid'});
}

sub store_finish
{
	my ($cell, $uuid, $how) = @_;
	my $role = $cell == 1 ? 'cell_one' : 'cell_two';
	$store->safe_psql('postgres', "SET ROLE $role; SELECT claims_$how($cell, '$uuid')");
}

# 0. Both exporters read everything as a pg_monitor member: every family is
# there and no query failed.
my $s = samples(http_get($store_url));
for my $f (qw(claims_store_begin_updates_total claims_store_errors_total
	claims_store_stale_lease_threshold_seconds claims_store_synchronous_standbys_configured
	claims_store_synchronous_standbys))
{
	ok(defined((grep { $_->[0] eq $f } @$s)[0]), "the store's exporter exports $f");
}
is(value($s, 'claims_store_stale_lease_threshold_seconds'), 3, 'the threshold is exported in seconds');
is(value($s, 'pg_exporter_last_scrape_error'), 0, 'no query of the store failed');
is(value($s, 'pg_up'), 1, 'the store exporter is connected (pg_up 1)');
is(value($s, 'claims_store_in_recovery'), 0, 'the store is a primary');
$s = samples(http_get($cell_url));
ok(defined value($s, 'claims_cell_store_calls_total', cell_id => '1'),
	'the cell is exported with its cell_id');
is(value($s, 'pg_exporter_last_scrape_error'), 0, 'no query of the cell failed');
is(value($s, 'claims_cell_reconcile_interval_seconds', cell_id => '1'), 1,
	'the reconcile interval is exported in seconds');

# 1. What the test does; every count below follows from it.
# cell 1 claims five values, one transaction each
$node->safe_psql('cell1', "INSERT INTO users VALUES ($_, 'user$_')") for 1 .. 5;
# cell 2 (at the store directly) claims bob and commits, takes carol
my $bob = store_begin(2, 'bob', 100);
store_finish(2, $bob, 'commit');
my $carol = store_begin(2, 'carol', 101);
# cell 1 meets both: 23505 for bob, 55P03 for carol
my ($state) = sql_state($node, 'cell1', "INSERT INTO users VALUES (6, 'bob')");
is($state, '23505', 'a value of another cell: 23505 at COMMIT');
($state) = sql_state($node, 'cell1', "INSERT INTO users VALUES (7, 'carol')");
is($state, '55P03', 'a value under another lease: 55P03 at COMMIT');
store_finish(2, $carol, 'rollback');
# a lease of cell 1 without a local row: the worker's reconcile() rolls it back
my $lost = store_begin(1, 'lost', 200);
ok( $store->poll_query_until('postgres', "SELECT state = 'rolled_back' FROM claim_leases WHERE uuid = '$lost'"),
	'reconcile() rolled back the lease without a local row');

my %store_cell = (
	1 => { begin_updates => 5 + 2 + 1, values_created => 5 + 1, commits => 5, rollbacks => 1,
		errors => { 23505 => 1, '55P03' => 1, 22023 => 0, 42501 => 0, P0002 => 0 } },
	2 => { begin_updates => 2, values_created => 2, commits => 1, rollbacks => 1,
		errors => { 23505 => 0, '55P03' => 0, 22023 => 0, 42501 => 0, P0002 => 0 } });
my %cell = (begin_updates => 7, commits => 5, rollbacks => 1, reconcile_rolled_back => 1,
	conflicts => { 23505 => 1, '55P03' => 1 });

# 2. The exporters' counters are exactly those (the scrapes are kept in the
# log directory).
sub scrape
{
	my ($url, $name) = @_;
	my $text = http_get($url);
	open my $out, '>', "$PostgreSQL::Test::Utils::log_path/$name.prom" or die $!;
	print $out $text;
	close $out;
	return samples($text);
}
$s = scrape($store_url, 'scrape_store');
for my $c (1, 2)
{
	my $e = $store_cell{$c};
	for my $m (qw(begin_updates values_created commits rollbacks))
	{
		is(value($s, "claims_store_cell_${m}_total", cell_id => $c), $e->{$m},
			"store, cell $c: claims_store_cell_${m}_total is $e->{$m}");
	}
	for my $st (sort keys %{ $e->{errors} })
	{
		is(value($s, 'claims_store_cell_errors_total', cell_id => $c, sqlstate => $st),
			$e->{errors}{$st}, "store, cell $c: claims_store_cell_errors_total{sqlstate=$st} is $e->{errors}{$st}");
	}
}
for my $m (qw(begin_updates values_created commits rollbacks))
{
	my $sum = $store_cell{1}{$m} + $store_cell{2}{$m};
	is(value($s, "claims_store_${m}_total"), $sum, "store: claims_store_${m}_total is $sum");
}
for my $st (qw(23505 55P03))
{
	is(value($s, 'claims_store_errors_total', sqlstate => $st), 1,
		"store: claims_store_errors_total{sqlstate=$st} is 1");
}
# every value of the test is a username
is(value($s, 'claims_store_bucket_type_values_total', bucket_type => 'USERNAMES', change => 'created'),
	$store_cell{1}{values_created} + $store_cell{2}{values_created},
	'store: every value created was a USERNAMES one');
for my $st (qw(23505 55P03))
{
	is(value($s, 'claims_store_bucket_type_conflicts_total', bucket_type => 'USERNAMES', sqlstate => $st), 1,
		"store: claims_store_bucket_type_conflicts_total{bucket_type=USERNAMES,sqlstate=$st} is 1");
}

$s = scrape($cell_url, 'scrape_cell');
for my $m (qw(begin_updates commits rollbacks reconcile_rolled_back))
{
	is(value($s, "claims_cell_${m}_total", cell_id => '1'), $cell{$m},
		"cell: claims_cell_${m}_total is $cell{$m}");
}
for my $st (sort keys %{ $cell{conflicts} })
{
	is(value($s, 'claims_cell_conflicts_total', cell_id => '1', sqlstate => $st), 1,
		"cell: claims_cell_conflicts_total{sqlstate=$st} is 1");
}
cmp_ok(value($s, 'claims_cell_reconcile_passes_total', cell_id => '1'), '>=', 2,
	'cell: the worker finished reconcile() passes (fence, then rollback)');
is(value($s, 'claims_cell_reconcile_failures_total', cell_id => '1'), 0, 'cell: no pass failed');
cmp_ok(abs(value($s, 'claims_cell_last_reconcile_timestamp_seconds', cell_id => '1') - time), '<', 30,
	'cell: the last pass is recent');
is(value($s, 'claims_cell_breaker_open', cell_id => '1'), 0, 'cell: the breaker is closed');
cmp_ok(value($s, 'claims_cell_store_call_duration_seconds_count', cell_id => '1'), '>=',
	$cell{begin_updates} + $cell{commits} + $cell{rollbacks},
	'cell: every lease call reached the store and has its duration counted');
cmp_ok(value($s, 'claims_cell_store_call_duration_seconds_sum', cell_id => '1'), '>', 0,
	'cell: the calls took time');

# 3. Prometheus scraped the same numbers, and the recording rules work.
ok(poll(sub { (prom_value('claims_store_cell_begin_updates_total{cell_id="1"}') // -1) == $store_cell{1}{begin_updates} }),
	'Prometheus has scraped the store');
ok(poll(sub { (prom_value('claims_cell_commits_total{cell_id="1"}') // -1) == $cell{commits} }),
	'Prometheus has scraped the cell');
ok(poll(sub { defined prom_value('claims:store_cell_begin_updates:rate5m{cell_id="1"}') }),
	'the recording rules evaluate');
# The lease reconcile() rolled back may have been old enough to count as
# stale at a reporter run before it was rolled back (a loaded machine): its
# alert then resolves at the next run, scrape and evaluation.
ok(poll(sub { join(',', alerts('firing')) eq '' }), 'no alert fires while nothing is wrong')
  or diag('firing: ' . join(',', alerts('firing')));

# 4. A lease left outstanding on purpose: stale after 3 s, the reporter
# counts it, and Prometheus fires ClaimsStaleLeases for its cell, then
# ClaimsOldestLeaseTooOld once it is 3 x 3 s old.
my $stuck = store_begin(2, 'stuck', 300);
ok(poll(sub { grep { $_ eq 'ClaimsStaleLeases 2' } alerts('firing') }),
	'the stale lease of cell 2 raises ClaimsStaleLeases for cell 2');
$s = samples(http_get($store_url));
is(value($s, 'claims_store_cell_stale_leases', cell_id => '2'), 1, 'the store exports one stale lease of cell 2');
is(value($s, 'claims_store_cell_stale_leases', cell_id => '1'), 0, 'and none of cell 1');
cmp_ok(value($s, 'claims_store_cell_oldest_lease_age_seconds', cell_id => '2'), '>=', 3,
	'the oldest outstanding lease of cell 2 is at least 3 s old');
is(value($s, 'claims_store_cell_oldest_lease_age_seconds', cell_id => '1'), 0,
	'cell 1 has no outstanding lease');
ok(poll(sub { grep { $_ eq 'ClaimsOldestLeaseTooOld 2' } alerts('firing') }),
	'ClaimsOldestLeaseTooOld fires for cell 2 once the lease is 9 s old');
is(join(',', grep { !/ 2$/ } alerts('firing')), '', 'no alert fires for cell 1');
store_finish(2, $stuck, 'rollback');
ok(poll(sub { !grep { /^ClaimsStaleLeases|^ClaimsOldestLeaseTooOld/ } alerts('firing') }),
	'both alerts resolve once the lease is rolled back');

# 5. reconcile() passes that fail: the store refuses the cell's role. Each
# failed pass ends its cycle worker with exit code 1; the counter must match
# those exits exactly, and ClaimsCellReconcileFailing fires.
my $offset = -s $node->logfile;
$store->safe_psql('postgres', q{
ALTER ROLE cell_one NOLOGIN;
SELECT count(pg_terminate_backend(pid)) >= 0 FROM pg_stat_activity WHERE usename = 'cell_one';
});
ok(poll(sub { grep { $_ eq 'ClaimsCellReconcileFailing 1' } alerts('firing') }),
	'failing passes raise ClaimsCellReconcileFailing');
$store->safe_psql('postgres', 'ALTER ROLE cell_one LOGIN');
my $passes = value(samples(http_get($cell_url)), 'claims_cell_reconcile_passes_total', cell_id => '1');
ok(poll(sub { value(samples(http_get($cell_url)), 'claims_cell_reconcile_passes_total', cell_id => '1') > $passes }),
	'passes succeed again once the role may log in');
my $log = slurp_file($node->logfile, $offset);
my $exits = () = $log =~ /background worker "claims_cell worker cycle" \(PID \d+\) exited with exit code 1/g;
$s = samples(http_get($cell_url));
cmp_ok($exits, '>=', 3, 'at least three cycles failed');
is(value($s, 'claims_cell_reconcile_failures_total', cell_id => '1'), $exits,
	"claims_cell_reconcile_failures_total counts the $exits failed passes exactly");

# 6. The synchronous standby: configured without one, the store says so
# (ClaimsStoreSynchronousStandbyMissing, after its 1 minute, is checked by
# promtool test rules).
$store->append_conf('postgresql.conf', "synchronous_standby_names = 'nosuch'\n");
$store->reload;
ok(poll(sub {
		my $x = samples(http_get($store_url));
		value($x, 'claims_store_synchronous_standbys_configured') == 1
		  && value($x, 'claims_store_synchronous_standbys') == 0 }),
	'a store configured for a synchronous standby without one exports configured 1, standbys 0');

# 7. The store down: its exporter says pg_up 0 at once, and
# ClaimsStoreUnreachable is pending (it fires after its 1 minute, which
# promtool test rules checks).
$store->stop('fast');
ok(poll(sub { value(samples(http_get($store_url)), 'pg_up') == 0 }),
	'with the store stopped its exporter reports pg_up 0');
ok(poll(sub { grep { $_ eq 'ClaimsStoreUnreachable -' } alerts('pending'), alerts('firing') }),
	'ClaimsStoreUnreachable is pending for the stopped store');

done_testing();
