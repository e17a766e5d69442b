
# ClaimsFault.pm: shared pieces of the fault tests (test/t/1NN_*.pl).
#
#  - node setup: a PostgreSQL::Test::Cluster node preloading claims, with the
#    claims and amcheck extensions created;
#  - ClaimsFault::Session: one long-lived psql process that runs one
#    statement at a time and reports, for each, whether it was acknowledged,
#    failed with an SQLSTATE, or lost (psql died: server crash, timeout);
#  - request builders for claims.v1 JSON;
#  - health checks: claims_check(), amcheck on every index of the
#    extension's tables, and crash messages in the server log;
#  - seeds (CLAIMS_SEED) and sizes from the environment.
#
# Children forked by a test must leave with POSIX::_exit so that the END
# blocks of PostgreSQL::Test::Cluster (which stop the nodes) run only in the
# test process itself.
package ClaimsFault;

use strict;
use warnings;

use Exporter 'import';
use IPC::Run ();
use JSON::PP ();
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Cwd ();
use Time::HiRes ();

our @EXPORT = qw(
  claims_seed env_int env_num new_claims_node register_cells enc dec
  metadata bucket_only claims_check_rows amcheck_failures
  crash_lines_in_log sql_quote run_children
  become_subreaper server_pids crash_node
);

my $json = JSON::PP->new->canonical(1)->allow_nonref(1);

# JSON text of a Perl structure (keys sorted, so equal requests are equal text).
sub enc { return $json->encode($_[0]); }

# Perl structure of a JSON text.
sub dec { return $json->decode($_[0]); }

# Integer from the environment, or the default.
sub env_int
{
	my ($name, $default) = @_;
	my $v = $ENV{$name};
	return $default unless defined $v && $v =~ /^\d+$/;
	return int($v);
}

# Number from the environment, or the default.
sub env_num
{
	my ($name, $default) = @_;
	my $v = $ENV{$name};
	return $default unless defined $v && $v =~ /^\d+(\.\d+)?$/;
	return $v + 0;
}

# The run's seed: CLAIMS_SEED if set, else a fresh one. Seeds Perl's
# generator and prints itself so a failure can be replayed.
sub claims_seed
{
	my $seed =
	  (defined $ENV{CLAIMS_SEED} && $ENV{CLAIMS_SEED} =~ /^\d+$/)
	  ? $ENV{CLAIMS_SEED}
	  : (time() ^ ($$ << 8)) % 2_000_000_000;
	srand($seed);
	diag("seed $seed (replay with CLAIMS_SEED=$seed)");
	return $seed;
}

# A single-quoted SQL literal.
sub sql_quote
{
	my ($s) = @_;
	$s =~ s/'/''/g;
	return "'$s'";
}

# A started node that preloads claims, with claims and amcheck created.
# Options: allows_streaming, conf (extra postgresql.conf text), start (default 1).
sub new_claims_node
{
	my ($name, %opt) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(allows_streaming => $opt{allows_streaming} ? 1 : 0);
	$node->append_conf('postgresql.conf', <<'EOC');
shared_preload_libraries = 'claims'
max_connections = 40
log_statement = none
log_min_messages = warning
log_min_error_statement = panic
EOC
	$node->append_conf('postgresql.conf', $opt{conf}) if defined $opt{conf};
	return $node if defined $opt{start} && !$opt{start};
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION claims; CREATE EXTENSION amcheck;');
	register_cells($node);
	return $node;
}

# Register cells (default 1 to 20) bound to one role. Every call for a cell
# must name a registered cell; the tests connect as the bootstrap superuser,
# an administrator, so registering is all they need.
sub register_cells
{
	my ($node, @cells) = @_;
	@cells = (1 .. 20) unless @cells;
	$node->safe_psql('postgres',
		join("\n",
			q{SET client_min_messages = warning;},
			q{DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'tap_cells')}
			  . q{ THEN CREATE ROLE tap_cells NOLOGIN; END IF; END $$;},
			map { "SELECT claims_register_cell($_, 'cell-$_', 'tap_cells');" } @cells));
	return;
}

# Metadata of a create: value of a bucket type, owned by a user.
sub metadata
{
	my ($type, $value, $subject_id, $source_id, $user_data) = @_;
	my %m = (
		bucket => { type => $type, value => $value },
		subject => { type => 'USER', id => $subject_id },
		source => { type => 'RAILS_TABLE_USERS', rails_primary_key_id => $source_id },
	);
	$m{user_data} = $user_data if defined $user_data;
	return \%m;
}

# Metadata of a destroy: only the value.
sub bucket_only
{
	my ($type, $value) = @_;
	return { bucket => { type => $type, value => $value } };
}

# Rows of claims_check() as "invariant|detail|claim|lease" lines.
sub claims_check_rows
{
	my ($node) = @_;
	my $out = $node->safe_psql('postgres',
		'SELECT invariant, detail, claim_uuid, lease_uuid FROM claims_check()');
	return grep { $_ ne '' } split /\n/, $out;
}

# amcheck bt_index_check(heapallindexed) on every index of the extension's
# tables; returns the failures (index name and message), empty when sound.
sub amcheck_failures
{
	my ($node) = @_;
	my $indexes = $node->safe_psql(
		'postgres', q{
SELECT i.indexrelid::regclass
FROM pg_index i
JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = i.indrelid
                 AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
JOIN pg_extension e ON e.oid = d.refobjid AND e.extname = 'claims'
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am am ON am.oid = c.relam AND am.amname = 'btree'
ORDER BY 1});
	my @failures;
	my @list = grep { $_ ne '' } split /\n/, $indexes;
	push @failures, 'no btree indexes of the claims tables were found' unless @list >= 5;
	for my $idx (@list)
	{
		my ($rc, $out, $err) = $node->psql('postgres',
			"SELECT bt_index_check('$idx'::regclass, heapallindexed => true)");
		push @failures, "$idx: $err" if $rc != 0;
	}
	return @failures;
}

# Lines of the node's log saying a server process crashed.
sub crash_lines_in_log
{
	my ($node, $offset) = @_;
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
	$log = substr($log, $offset) if defined $offset && $offset <= length($log);
	return grep {
		/server process .* was terminated by signal/
		  || /terminated by signal \d+: (Segmentation|Aborted|Bus)/
		  || /TRAP: /
		  || /PANIC:/
	} split /\n/, $log;
}

# Make this process the reaper of its orphaned descendants (Linux
# PR_SET_CHILD_SUBREAPER), so that a postmaster killed with SIGKILL is
# reaped here even where PID 1 of a container reaps nothing; a zombie
# postmaster would otherwise keep its postmaster.pid looking alive.
sub become_subreaper
{
	# prctl(PR_SET_CHILD_SUBREAPER = 36, 1) is syscall 157 on x86_64
	return 0 unless $^O eq 'linux';
	my $arch = `uname -m 2>/dev/null` // '';
	return 0 unless $arch =~ /x86_64/;
	return syscall(157, 36, 1, 0, 0, 0) == 0;
}

# Processes still working in a node's data directory.
sub server_pids
{
	my ($node) = @_;
	my $dir = Cwd::realpath($node->data_dir);
	my @pids;
	for my $p (glob '/proc/[0-9]*')
	{
		my $cwd = readlink("$p/cwd") // next;
		push @pids, ($p =~ m{(\d+)$})[0] if $cwd eq $dir;
	}
	return @pids;
}

# True while a killed process is still on its way out: it exists and is not
# yet a zombie. Its working directory may already be gone from /proc (so
# server_pids no longer lists it) while kill(pid, 0), the test a new
# postmaster makes of the PID in postmaster.pid, still finds it.
sub pid_exiting
{
	my ($pid) = @_;
	return 0 unless defined $pid && $pid =~ /^\d+$/ && -e "/proc/$pid";
	my $stat = '';
	if (open my $fh, '<', "/proc/$pid/stat") { $stat = <$fh> // ''; close $fh; }
	return $stat ne '' && $stat !~ /^\d+ \(.*\) [ZX] /;
}

# Crash a node: SIGKILL its postmaster (and, with whole => 1, every backend
# at once, as a machine crash would), then wait until none of its processes
# is left so that it can be started again.
sub crash_node
{
	my ($node, %opt) = @_;
	my $pm;
	if (open my $fh, '<', $node->data_dir . '/postmaster.pid')
	{
		$pm = <$fh>;
		close $fh;
		chomp $pm if defined $pm;
	}
	my @backends = $opt{whole} ? server_pids($node) : ();
	$node->kill9;
	kill 'KILL', @backends if @backends;
	my $deadline = Time::HiRes::time() + 60;
	while (Time::HiRes::time() < $deadline)
	{
		1 while waitpid(-1, POSIX::WNOHANG()) > 0;
		last unless server_pids($node) || pid_exiting($pm);
		Time::HiRes::sleep(0.05);
	}
	1 while waitpid(-1, POSIX::WNOHANG()) > 0;
	if (defined $pm && $pm =~ /^\d+$/ && -e "/proc/$pm")
	{
		my $stat = '';
		if (open my $fh, '<', "/proc/$pm/stat") { $stat = <$fh> // ''; close $fh; }
		# a zombie nobody reaps: its lock file is stale
		unlink($node->data_dir . '/postmaster.pid') if $stat =~ /^\d+ \(.*\) Z /;
	}
	return;
}

# Fork one child per element of @args running $code->($arg); returns the
# pids. Children leave with POSIX::_exit (see the top of this file).
sub run_children
{
	my ($code, @args) = @_;
	my @pids;
	for my $arg (@args)
	{
		my $pid = fork();
		die "fork failed: $!" unless defined $pid;
		if ($pid == 0)
		{
			my $rc = 0;
			eval { $code->($arg); 1 } or do { print STDERR "child: $@"; $rc = 1; };
			POSIX::_exit($rc);
		}
		push @pids, $pid;
	}
	return @pids;
}

package ClaimsFault::Session;

use strict;
use warnings;

use IPC::Run ();
use Time::HiRes ();

# Seconds on the monotonic clock, the same for every process of the
# machine: the times requests were sent and answered are compared across
# clients, and must not jump with the wall clock.
sub now { return Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()); }

# A psql process on $connstr (connstr of a node plus dbname).
sub new
{
	my ($class, $connstr, %opt) = @_;
	my $self = bless {
		connstr => $connstr,
		timeout => $opt{timeout} // 120,
		n => 0,
	}, $class;
	return $self;
}

# Start psql if it is not running; false when it could not connect.
sub connect
{
	my ($self) = @_;
	return 1 if $self->{h};
	$self->{in} = '';
	$self->{out} = '';
	$self->{err} = '';
	$self->{timer} = IPC::Run::timer($self->{timeout});
	my $h = eval {
		IPC::Run::start(
			[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=0', '-v', 'VERBOSITY=terse',
			  '-d', $self->{connstr}, '-f', '-' ],
			'<', \$self->{in}, '>', \$self->{out}, '2>', \$self->{err},
			$self->{timer});
	};
	return 0 unless $h;
	$self->{h} = $h;
	my $r = $self->query('SELECT 1');
	if ($r->{lost} || $r->{sqlstate} ne '00000')
	{
		$self->close;
		return 0;
	}
	return 1;
}

# Run one statement. Returns {sqlstate, out, err, ts, te} where sqlstate is
# '00000' on success, or {lost => 1, ...} when psql ended (or timed out)
# before the answer: the outcome is unknown.
sub query
{
	my ($self, $sql) = @_;
	$self->send($sql);
	return $self->result;
}

# Send one statement without waiting for its answer (a statement that is
# expected to block); result() then waits for it.
sub send
{
	my ($self, $sql) = @_;
	my $n = ++$self->{n};
	my $banner = "__claims_done_${n}__";
	$self->{pending} = { banner => $banner, ts => now() };
	return unless $self->{h};
	$self->{out} = '';
	$self->{err} = '';
	$self->{timer}->start($self->{timeout});
	my $bytes = $sql;
	utf8::encode($bytes);
	$self->{in} .= "$bytes\n;\n\\echo $banner :SQLSTATE\n";
	eval { $self->{h}->pump_nb; 1 };
	return;
}

# The answer of the statement sent last, waiting for it.
sub result
{
	my ($self) = @_;
	my $p = delete $self->{pending} // { banner => '__claims_nothing_sent__', ts => now() };
	my $banner = $p->{banner};
	my %r = (ts => $p->{ts});
	if (!$self->{h})
	{
		$r{lost} = 1;
		$r{te} = now();
		$r{err} = 'not connected';
		return \%r;
	}
	# psql prints the banner with an empty SQLSTATE when the statement
	# failed without reaching the server (the connection was closed while
	# psql was idle, by a crash restart for instance); it does not end
	# then, so that counts as lost too.
	my $ok = eval {
		while ($self->{out} !~ /$banner (\w*)\n/)
		{
			die "psql ended\n" unless $self->{h}->pumpable;
			die "no answer within $self->{timeout} s\n" if $self->{timer}->is_expired;
			$self->{h}->pump;
		}
		1;
	};
	$r{te} = now();
	if ($ok && $self->{out} =~ /^(.*?)$banner (\w+)\n/s)
	{
		$r{out} = $1;
		$r{sqlstate} = $2;
		$r{out} =~ s/\n$//;
		$r{err} = $self->{err};
		return \%r;
	}
	$r{lost} = 1;
	$r{err} = $self->{err} . ($@ // '');
	$self->close;
	return \%r;
}

# End psql (killing it if need be).
sub close
{
	my ($self) = @_;
	my $h = delete $self->{h};
	return unless $h;
	eval { $h->kill_kill(grace => 1); 1 } if $h->pumpable;
	eval { $h->finish; 1 };
	return;
}

1;
