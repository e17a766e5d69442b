
# claims_list_records while every cached copy keeps being invalidated.
#
# A cell pages through its records (pages of 1000, several hundred kB each)
# in a loop: some clients reconnect for every pass, as a reconciler run does
# (a new backend plans everything afresh), others keep one connection. At
# the same time an ordinary role creates and drops temporary tables in a
# tight loop (enough invalidation messages to overflow the shared queue, so
# that busy backends must reset all their caches) and an operator adds,
# changes and removes registry types that no record uses (each commit
# invalidates every backend's copy of the registries).
#
# None of that changes the records, so every page must be answered, and be
# exactly the page of a reference read made before the churn (itself
# checked against what was loaded). The server must never crash: no crash
# or crash recovery in its log, the same postmaster and start time, and a
# session opened before the churn still connected to the same backend.
#
# Environment: CLAIMS_CHURN_SECONDS (default 15), CLAIMS_CHURN_LISTERS
# (default 2), CLAIMS_CHURN_SOURCES (source ids of the cell, two records
# each; default 1500, i.e. 3000 records in 3 pages), CLAIMS_CHURN_REGISTRY
# (0: no registry churn, temporary tables only; default 1).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsChurn;
use ClaimsFault;
use File::Path qw(make_path);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $seconds = env_num('CLAIMS_CHURN_SECONDS', 15);
my $nlisters = env_int('CLAIMS_CHURN_LISTERS', 2);
my $nsources = env_int('CLAIMS_CHURN_SOURCES', 1500);
my $registry_churn = env_int('CLAIMS_CHURN_REGISTRY', 1);
my $cell = 21;
my $prefix = 'churn';

# A crashed backend must not end the run: the server restarts as a
# production server would, the clients go on, and the test counts it.
my $node = new_claims_node('cache_churn', conf => "restart_after_crash = on\n");
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/cache_churn";
make_path($dir);

# The cell's own role (not an administrator) and an ordinary role.
$node->safe_psql('postgres', <<"EOS");
CREATE ROLE churn_cell LOGIN;
CREATE ROLE churn_temp LOGIN;
SET client_min_messages = warning;
SELECT claims_register_cell($cell, 'cell-$cell', 'churn_cell');
EOS
load_source_records($node, $cell, $nsources, $prefix);

# Reference read, before any churn, checked against what was loaded.
my $cell_connstr = as_role($node, 'churn_cell');
my $ref_session = ClaimsFault::Session->new($cell_connstr);
$ref_session->connect or die 'the cell role cannot connect';
my ($pages, $listed) = read_reference($ref_session, $cell);
$ref_session->close;
my @expected = expected_listing($nsources, $prefix);
is(scalar(@$listed), scalar(@expected), 'the reference read lists ' . scalar(@expected) . ' records');
is_deeply($listed, \@expected, 'the reference read lists each record once, in source id order');
cmp_ok(scalar(@$pages), '>=', 2, 'the records span several pages');
diag(scalar(@$pages) . ' pages: ' . join(', ', map { (split /\|/, $_->{answer})[1] } @$pages) . ' records');

# ---------------------------------------------------------------------------
# One lister: pass after pass over all pages until the deadline; a "fresh"
# lister reconnects for every pass. Every answer is compared with the
# reference; anything else is written to its log.
sub lister_main
{
	my ($arg) = @_;
	my ($k, $fresh, $t0, $deadline, $file) = @$arg;
	open my $log, '>', "$file.log" or die "open $file.log: $!";
	$log->autoflush(1);
	my %sum = map { ($_ => 0) } qw(calls ok wrong errors lost passes connects);
	$sum{first_failure} = '-';
	my $s;
	my $fail = sub {
		my ($what) = @_;
		$sum{first_failure} = sprintf('%.1f', time() - $t0) if $sum{first_failure} eq '-';
		printf $log "%.3f %s\n", time() - $t0, $what;
	};
	PASS: while (time() < $deadline)
	{
		if (!$s)
		{
			$s = ClaimsFault::Session->new($cell_connstr, timeout => 120);
			if (!$s->connect)
			{
				undef $s;
				sleep(0.2);
				next;
			}
			$sum{connects}++;
		}
		for my $i (0 .. $#$pages)
		{
			my $r = $s->query(page_sql($pages->[$i]{req}));
			$sum{calls}++;
			if ($r->{lost})
			{
				$sum{lost}++;
				$fail->("page $i: connection lost: $r->{err}");
				$s->close;
				undef $s;
				next PASS;
			}
			if ($r->{sqlstate} ne '00000')
			{
				$sum{errors}++;
				$fail->("page $i: $r->{sqlstate} $r->{err}");
			}
			elsif ($r->{out} ne $pages->[$i]{answer})
			{
				$sum{wrong}++;
				$fail->("page $i: answered $r->{out}, expected $pages->[$i]{answer}");
			}
			else
			{
				$sum{ok}++;
			}
		}
		$sum{passes}++;
		if ($fresh)
		{
			$s->close;
			undef $s;
		}
	}
	$s->close if $s;
	close $log;
	write_summary($file, %sum);
	return;
}

my $offset = log_offset($node);
my $identity = server_identity($node);
my $sentinel = ClaimsFault::Session->new($node->connstr('postgres'));
$sentinel->connect or die 'sentinel cannot connect';
my $sentinel_pid = $sentinel->query('SELECT pg_backend_pid()')->{out};

my $t0 = time();
my $deadline = $t0 + $seconds;
my @listers = map { [ $_, $_ % 2 == 0 ? 1 : 0, $t0, $deadline, "$dir/lister$_" ] } 0 .. $nlisters - 1;
my @pids = (
	run_children(\&lister_main, @listers),
	run_children(sub { temp_table_churn(as_role($node, 'churn_temp'), $deadline, "$dir/temp") }, 1),
	($registry_churn ? run_children(sub { registry_churn($node->connstr('postgres'), $deadline, "$dir/registry") }, 1) : ()));
my $failed_children = 0;
for my $pid (@pids)
{
	waitpid($pid, 0);
	$failed_children++ if $? != 0;
}
is($failed_children, 0, 'every client and churner ran to the end');
$node->poll_query_until('postgres', 'SELECT true') or die 'the server does not answer any more';

# ---------------------------------------------------------------------------
my %temp = read_summary("$dir/temp");
my %registry = read_summary("$dir/registry");
diag(sprintf('churn for %.0f s: %s temporary tables, %s registry changes (bursts cut off: %s, %s)',
	$seconds, $temp{temp_tables} // '?', $registry{registry_changes} // '?',
	$temp{lost} // '?', $registry{lost} // '?'));
# (A burst cut off by a crash restart reports no count: then it must at
# least have run.)
ok(($temp{bursts} // 0) > 0 && (($temp{temp_tables} // 0) > 0 || ($temp{lost} // 0) > 0),
	'the ordinary role created temporary tables throughout');
ok(($registry{bursts} // 0) > 0 && (($registry{registry_changes} // 0) > 0 || ($registry{lost} // 0) > 0),
	'the registries changed throughout') if $registry_churn;

my %total = map { ($_ => 0) } qw(calls ok wrong errors lost passes connects);
for my $l (@listers)
{
	my %sum = read_summary("$l->[4]");
	diag(sprintf('lister %d (%s): %s', $l->[0], $l->[1] ? 'new connection per pass' : 'one connection',
		join(', ', map { "$_=" . ($sum{$_} // '?') } qw(calls ok wrong errors lost passes first_failure))));
	$total{$_} += $sum{$_} // 0 for keys %total;
	cmp_ok($sum{passes} // 0, '>', 0, "lister $l->[0] completed passes over all pages");
	if (-s "$l->[4].log")
	{
		my @lines = split /\n/, slurp_file("$l->[4].log");
		diag("lister $l->[0], first failures:\n" . join("\n", @lines[ 0 .. ($#lines < 4 ? $#lines : 4) ]));
	}
}
cmp_ok($total{calls}, '>', 0, 'claims_list_records was called');
is($total{lost}, 0, 'no call of claims_list_records lost its connection (no backend crashed)');
is($total{errors}, 0, 'every call of claims_list_records succeeded');
is($total{wrong}, 0, 'every page is exactly the page of the reference read');
is($total{ok}, $total{calls}, 'every answer was checked and correct');

my @evidence = restart_evidence($node, $offset);
is(scalar(@evidence), 0, 'no server process crashed and the server never went through crash recovery')
  or diag(join("\n", @evidence[ 0 .. ($#evidence < 10 ? $#evidence : 10) ]));
my $after = $sentinel->query('SELECT pg_backend_pid()');
ok(!$after->{lost} && ($after->{out} // '') eq $sentinel_pid,
	'a session opened before the churn is still connected to the same backend');
$sentinel->close;
is(server_identity($node), $identity, 'same postmaster, same start time');

# The data did not change, and nothing is wrong with it.
my $check = ClaimsFault::Session->new($cell_connstr);
$check->connect or die 'the cell role cannot connect';
my ($pages_after) = read_reference($check, $cell);
$check->close;
is_deeply([ map { $_->{answer} } @$pages_after ], [ map { $_->{answer} } @$pages ],
	'a final read gives the reference pages');
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty');

done_testing();
