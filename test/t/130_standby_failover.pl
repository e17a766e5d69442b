
# Standby and failover: a primary with a synchronous streaming standby.
#  - The read functions answer on the standby, and agree with the primary
#    once the standby has replayed; claims_check() runs there too.
#  - The write functions fail on the standby with 25006 and nothing else.
#  - Under load, the primary is killed (SIGKILL, whole server) and the
#    standby promoted: every commit a client was told succeeded is there,
#    every acknowledged lease exists, the requests in flight are all or
#    nothing, claims_check() is empty and amcheck passes.
#  - The stale lease reporter starts on the promoted node and reports the
#    leases the crash left outstanding (in the log and by NOTIFY).
#
# Environment: CLAIMS_SEED (replay), CLAIMS_FAILOVER_CLIENTS (default 3),
# CLAIMS_FAILOVER_LOAD_SECONDS (default 3).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use ClaimsModel;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $seed = claims_seed();
become_subreaper();
my $nclients = env_int('CLAIMS_FAILOVER_CLIENTS', 3);
my $load_seconds = env_num('CLAIMS_FAILOVER_LOAD_SECONDS', 3);
my $t0 = time();

my $primary = new_claims_node('primary', allows_streaming => 1);

# The stale lease reporter's settings exist once the worker is built in.
my $has_reporter = $primary->safe_psql('postgres',
	q{SELECT count(*) FROM pg_settings WHERE name = 'claims.stale_lease_threshold'});
if ($has_reporter)
{
	$primary->append_conf('postgresql.conf', <<'EOC');
claims.stale_lease_threshold = 1
claims.report_interval = 1
EOC
	$primary->reload;
}

$primary->backup('base');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'base', has_streaming => 1);
$standby->start;
# from now on commits wait until the standby has them
$primary->append_conf('postgresql.conf', "synchronous_standby_names = 'standby'\n");
$primary->reload;
$primary->poll_query_until('postgres',
	q{SELECT sync_state = 'sync' FROM pg_stat_replication WHERE application_name = 'standby'})
  or BAIL_OUT('the standby did not become synchronous');

# ---------------------------------------------------------------------------
# Some data on the primary: committed claims of three cells, and leases left
# outstanding (creates, destroys and a replace).
my @values;
for my $cell (1 .. 3)
{
	for my $i (1 .. 6)
	{
		my $type = (qw(USERNAMES EMAILS ROUTES))[ $i % 3 ];
		my $value = $type eq 'EMAILS' ? "s$cell-$i\@standby.test" : "s$cell-$i";
		push @values, [ $cell, $type, $value ];
		my $req = enc({ cell_id => $cell, create_records => [ metadata($type, $value, 100 * $cell + $i, 1000 * $cell + $i) ] });
		my $lease = $primary->safe_psql('postgres',
			'SELECT claims_begin_update(' . sql_quote($req) . "::jsonb)->>'lease_uuid'");
		$primary->safe_psql('postgres', "SELECT claims_commit($cell, '$lease')") if $i <= 4;
	}
	my ($t1, $v1) = @{ $values[-6] }[ 1, 2 ];
	my ($t2, $v2) = @{ $values[-5] }[ 1, 2 ];
	$primary->safe_psql('postgres', 'SELECT claims_begin_update(' . sql_quote(enc({
		cell_id => $cell,
		destroy_records => [ bucket_only($t1, $v1), bucket_only($t2, $v2) ],
		create_records => [ metadata($t2, $v2, 7, 8) ] })) . '::jsonb)');
}
$primary->wait_for_catchup('standby', 'replay');

# ---------------------------------------------------------------------------
# Reads on the standby agree with the primary.
my @reads;
for my $v (@values)
{
	my ($cell, $type, $value) = @$v;
	push @reads, 'SELECT claims_get_record(' . sql_quote(enc({ bucket => { type => $type, value => $value } })) . '::jsonb)';
	my $field = { USERNAMES => 'username', EMAILS => 'email', ROUTES => 'route' }->{$type};
	push @reads, 'SELECT claims_get_record(' . sql_quote(enc({ claim => { $field => $value } })) . '::jsonb)';
}
push @reads, 'SELECT claims_get_record(\'{"bucket": {"type": "USERNAMES", "value": "nobody"}}\'::jsonb) IS NULL';
for my $cell (1 .. 4)
{
	push @reads, "SELECT claims_list_leases('{\"cell_id\": $cell}'::jsonb)";
	push @reads, "SELECT claims_list_leases('{\"cell_id\": $cell, \"limit\": 1}'::jsonb)";
	push @reads, "SELECT claims_list_records('{\"cell_id\": $cell, \"source_type\": \"RAILS_TABLE_USERS\"}'::jsonb)";
	push @reads, "SELECT claims_list_records('{\"cell_id\": $cell, \"source_type\": \"RAILS_TABLE_USERS\", \"limit\": 2, \"bucket_types\": [\"USERNAMES\", \"EMAILS\"]}'::jsonb)";
}
push @reads, 'SELECT count(*) FROM claims_check()';
my ($same, @differ) = (0);
for my $q (@reads)
{
	my ($rc_p, $out_p, $err_p) = $primary->psql('postgres', $q);
	my ($rc_s, $out_s, $err_s) = $standby->psql('postgres', $q);
	if ($rc_p == 0 && $rc_s == 0 && $out_p eq $out_s && $out_p ne '')
	{
		$same++;
	}
	else
	{
		push @differ, "$q\n  primary ($rc_p): $out_p $err_p\n  standby ($rc_s): $out_s $err_s";
	}
}
is(scalar(@differ), 0, "the standby answers $same read requests exactly as the primary")
  or diag(join("\n", @differ[ 0 .. ($#differ < 10 ? $#differ : 10) ]));
is($standby->safe_psql('postgres', 'SELECT count(*) FROM claims_check()'), '0',
	'claims_check() runs on the standby and is empty');

# Writes on the standby: 25006 and nothing else, whatever the request.
my $some_lease = $primary->safe_psql('postgres',
	q{SELECT uuid FROM claim_leases WHERE state = 'outstanding' ORDER BY created_at LIMIT 1});
my $done_lease = $primary->safe_psql('postgres',
	q{SELECT uuid FROM claim_leases WHERE state = 'committed' ORDER BY created_at LIMIT 1});
my @writes = (
	'SELECT claims_begin_update(' . sql_quote(enc({ cell_id => 1, create_records => [ metadata('USERNAMES', 'on-standby', 1, 1) ] })) . '::jsonb)',
	'SELECT claims_begin_update(' . sql_quote(enc({ cell_id => 1, create_records => [ metadata('USERNAMES', 's1-1', 1, 1) ] })) . '::jsonb)',
	'SELECT claims_begin_update(' . sql_quote(enc({ cell_id => 2, destroy_records => [ bucket_only('USERNAMES', 's1-3') ] })) . '::jsonb)',
	q{SELECT claims_begin_update('{"cell_id": 0, "bogus": true}'::jsonb)},
	q{SELECT claims_begin_update('[]'::jsonb)},
	"SELECT claims_commit(1, '$some_lease')",
	"SELECT claims_rollback(1, '$some_lease')",
	"SELECT claims_commit(2, '$some_lease')",
	"SELECT claims_rollback(1, '$done_lease')",
	"SELECT claims_commit(1, '00000000-0000-0000-0000-000000000000')",
	"SELECT claims_rollback(-1, '00000000-0000-0000-0000-000000000000')",
);
my @wrong;
for my $q (@writes)
{
	my ($rc, $out, $err) = $standby->psql('postgres', $q, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	push @wrong, "$q\n  => rc $rc: $out $err" unless $rc != 0 && $err =~ /ERROR:\s+25006:/;
}
is(scalar(@wrong), 0, 'every write function fails on the standby with 25006 (' . scalar(@writes) . ' requests)')
  or diag(join("\n", @wrong));
is($standby->safe_psql('postgres', 'SELECT count(*) FROM claims_check()'), '0',
	'the standby is unchanged by the refused writes');

# ---------------------------------------------------------------------------
# Failover under load. The rows made so far must come through unchanged.
my ($before_claims, $before_leases) = actual_state($primary);
my $logdir = "${PostgreSQL::Test::Utils::tmp_check}/failover_clients";
make_path($logdir);
my @models = map { new_model($_, 8) } 0 .. $nclients - 1;
my @retry = (undef) x $nclients;
my @files = map { "$logdir/c$_.log" } 0 .. $nclients - 1;
my $connstr = $primary->connstr('postgres');
my @pids = run_children(\&model_client_main,
	map { [ $connstr, $models[$_], undef, $files[$_], int(rand(2**31)) ] } 0 .. $nclients - 1);
sleep($load_seconds * (0.7 + rand(0.6)));
crash_node($primary, whole => 1);
waitpid($_, 0) for @pids;

my $promote_start = time();
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
  or BAIL_OUT('the standby was not promoted');
my $promote_seconds = time() - $promote_start;
# the new primary has no standby yet: commit locally
$standby->safe_psql('postgres', q{ALTER SYSTEM SET synchronous_standby_names = ''; SELECT pg_reload_conf();});

my %stats = map { ($_ => 0) } qw(answers_checked inflight_applied inflight_not_applied inflight_no_change);
my @problems = check_models($standby, \@models, \@files, \@retry, 'after failover', \%stats,
	{ leases => $before_leases, claims => $before_claims });
my ($after_claims, $after_leases) = actual_state($standby);
for my $k (sort keys %$before_claims)
{
	push @problems, "claim $k made before the load changed: $before_claims->{$k} became " . ($after_claims->{$k} // 'absent')
	  if ($after_claims->{$k} // '') ne $before_claims->{$k};
}
for my $l (sort keys %$before_leases)
{
	push @problems, "lease $l made before the load changed: $before_leases->{$l} became " . ($after_leases->{$l} // 'absent')
	  if ($after_leases->{$l} // '') ne $before_leases->{$l};
}
my $committed = 0;
for my $m (@models)
{
	$committed += grep { $_->{state} eq 'committed' } values %{ $m->{leases} };
}
ok($stats{answers_checked} > 0, "$stats{answers_checked} answers of $nclients clients given before the failover");
is(scalar(@problems), 0, "the promoted standby holds every acknowledged change ($committed committed leases)")
  or diag(join("\n", @problems[ 0 .. ($#problems < 40 ? $#problems : 40) ]));
is(join("\n", claims_check_rows($standby)), '', 'claims_check() is empty on the promoted standby');
is(join("\n", amcheck_failures($standby)), '', 'amcheck passes on the promoted standby');

# The store works on the new primary.
my $lease = $standby->safe_psql('postgres', 'SELECT claims_begin_update(' . sql_quote(enc({
	cell_id => 1, create_records => [ metadata('USERNAMES', 'after-failover', 1, 1) ] })) . "::jsonb)->>'lease_uuid'");
$standby->safe_psql('postgres', "SELECT claims_commit(1, '$lease')");
like($standby->safe_psql('postgres', q{SELECT claims_get_record('{"claim": {"username": "after-failover"}}')->'record'->>'status'}),
	qr/^ACTIVE$/, 'the promoted standby accepts writes');

# ---------------------------------------------------------------------------
# The stale lease reporter on the promoted node.
SKIP:
{
	skip 'the stale lease reporter is not built in (no setting claims.stale_lease_threshold)', 4
	  unless $has_reporter;

	my %outstanding = map { my @f = split /\|/; ($f[0] => $f[1]) } split /\n/,
	  $standby->safe_psql('postgres',
		q{SELECT creator_id, count(*) FROM claim_leases WHERE state = 'outstanding' GROUP BY 1 ORDER BY 1});
	ok(scalar(keys %outstanding) > 0, 'the crash left outstanding leases of cells '
		. join(', ', map { "$_ ($outstanding{$_})" } sort keys %outstanding));

	ok($standby->poll_query_until('postgres',
		q{SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type = 'claims stale lease reporter'}),
		'the stale lease reporter runs on the promoted node');

	# every cell's leases reported in the log with their current count
	my $deadline = time() + 60;
	my %reported;
	while (time() < $deadline)
	{
		my $log = slurp_file($standby->logfile);
		while ($log =~ /WARNING:\s+claims: cell (\d+) has (\d+) stale leases?/g)
		{
			$reported{$1} = $2;
		}
		last if !grep { ($reported{$_} // -1) != $outstanding{$_} } keys %outstanding;
		sleep(0.5);
	}
	is(join(', ', map { "$_=" . ($reported{$_} // 'none') } sort keys %outstanding),
		join(', ', map { "$_=$outstanding{$_}" } sort keys %outstanding),
		'the reporter logs a WARNING for every cell with the leases the crash left');

	# and notifies listeners
	my $s = ClaimsFault::Session->new($standby->connstr('postgres'), timeout => 30);
	$s->connect;
	$s->query('LISTEN claims_stale_leases');
	my $heard = '';
	# until the usual test timeout: the reporter notifies every second, but
	# a loaded machine may take more than a fixed number of tries
	my $listen_until = time() + $PostgreSQL::Test::Utils::timeout_default;
	while (time() < $listen_until)
	{
		my $r = $s->query('SELECT 1');
		$heard .= $r->{out} // '';
		last if $heard =~ /claims_stale_leases/;
		sleep(0.25);
	}
	$s->close;
	like($heard, qr/Asynchronous notification "claims_stale_leases" with payload/,
		'the reporter sends NOTIFY claims_stale_leases');
}

diag(sprintf('figures: failovers=1 answers_checked=%d committed_leases=%d inflight_applied=%d inflight_not_applied=%d promote_seconds=%.1f seconds=%.0f seed=%d',
	$stats{answers_checked}, $committed, $stats{inflight_applied}, $stats{inflight_not_applied},
	$promote_seconds, time() - $t0, $seed));

$standby->stop;
done_testing();
