
# Crash safety: clients run begin_update / commit / rollback against a real
# server, each recording what it asked and what it was told, while the
# server is killed with SIGKILL at random moments and restarted. After each
# restart the store must hold exactly what the acknowledged answers imply:
# every acknowledged lease exists in its state, every acknowledged commit's
# claims are in their committed state, and the one request in flight per
# client at the crash is all or nothing. claims_check() must be empty and
# amcheck must pass on every index.
#
# Environment: CLAIMS_SEED (replay), CLAIMS_FAULT_ROUNDS (crashes, default
# 12), CLAIMS_CRASH_CLIENTS (default 4), CLAIMS_CRASH_MAX_RUN (longest
# seconds of load before a crash, default 1.5).
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
my $rounds = env_int('CLAIMS_FAULT_ROUNDS', 12);
my $nclients = env_int('CLAIMS_CRASH_CLIENTS', 4);
my $max_run = env_num('CLAIMS_CRASH_MAX_RUN', 1.5);
my $pool_size = 10;
my $started = time();

my $node = new_claims_node('crash');
my $connstr = $node->connstr('postgres');
my $logdir = "${PostgreSQL::Test::Utils::tmp_check}/crash_clients";
make_path($logdir);

# ---------------------------------------------------------------------------
my @models = map { new_model($_, $pool_size) } 0 .. $nclients - 1;
my @retry = (undef) x $nclients;
my $crashes = 0;
my %stats = map { ($_ => 0) } qw(answers_checked inflight_applied inflight_not_applied inflight_no_change);
my @problems;

for my $round (1 .. $rounds)
{
	my @files = map { "$logdir/r${round}_c$_.log" } 0 .. $nclients - 1;
	my @pids = run_children(\&model_client_main,
		map { [ $connstr, $models[$_], $retry[$_], $files[$_], int(rand(2**31)) ] } 0 .. $nclients - 1);

	my $run = 0.2 + rand($max_run);
	sleep($run);
	# even rounds: the whole server dies at once; odd rounds: only the
	# postmaster, its backends finish what they were doing and exit
	crash_node($node, whole => $round % 2 == 0);
	$crashes++;
	waitpid($_, 0) for @pids;
	crash_node($node) if server_pids($node);
	$node->start;

	push @problems, check_models($node, \@models, \@files, \@retry, "round $round", \%stats);
	my @check = claims_check_rows($node);
	push @problems, map { "round $round claims_check: $_" } @check;
	my @am = amcheck_failures($node);
	push @problems, map { "round $round amcheck: $_" } @am;
	last if @problems > 50;
}

ok($crashes >= 10 || $crashes == $rounds, "server killed with SIGKILL and restarted $crashes times");
ok($stats{answers_checked} > 0, "$stats{answers_checked} acknowledged answers checked against the model");
is(scalar(@problems), 0, 'after every restart the store holds exactly what was acknowledged')
  or diag(join("\n", @problems[ 0 .. ($#problems < 40 ? $#problems : 40) ]));
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty at the end');
is(join("\n", amcheck_failures($node)), '', 'amcheck passes on every index at the end');

my $elapsed = time() - $started;
diag(sprintf('figures: crashes=%d answers_checked=%d inflight_applied=%d inflight_not_applied=%d inflight_no_change=%d seconds=%.0f seed=%d',
	$crashes, @stats{qw(answers_checked inflight_applied inflight_not_applied inflight_no_change)}, $elapsed, $seed));

$node->stop;
done_testing();
