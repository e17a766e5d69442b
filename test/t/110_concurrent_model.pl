
# Races checked against a model: clients of three cells fight over a small
# set of hot values with begin_update (create, destroy, replace), commit and
# rollback for a bounded time, recording every request with the times it was
# sent and answered. Afterwards the store is checked against a model rebuilt
# from the answers alone.
#
# Why the check is sound: a value is held by at most one lease at a time,
# and a lease's holder sends its commit or rollback only after its
# begin_update was answered. So if lease A held value v before lease B did,
#   A.begin answered < A.finish sent <= A.finish committed
#                    < B.begin committed <= B.begin answered,
# which means the leases that ever held v, sorted by the time their
# begin_update was answered, are in their true order. Replaying them in that
# order must (1) never grant v while it was held (a create needs v free, a
# destroy or replace needs v active and owned by the same cell), (2) never
# show two leases whose lifetimes certainly overlapped (the next begin was
# answered before the previous lease's finish was even sent), and (3) end in
# exactly the row the store holds. Every error must be a documented SQLSTATE
# and no deadlock (40P01) may occur.
#
# Environment: CLAIMS_SEED (replay), CLAIMS_RACE_SECONDS (default 30),
# CLAIMS_RACE_CLIENTS (default 8), CLAIMS_RACE_VALUES (default 20).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use File::Path qw(make_path);
use List::Util qw(shuffle);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep time);

my $seed = claims_seed();
my $seconds = env_num('CLAIMS_RACE_SECONDS', 30);
my $nclients = env_int('CLAIMS_RACE_CLIENTS', 8);
my $nvalues = env_int('CLAIMS_RACE_VALUES', 20);
my %documented = map { $_ => 1 } qw(00000 23505 55P03 P0002 42501 55000);

my $node = new_claims_node('race');
my $connstr = $node->connstr('postgres');
my $logdir = "${PostgreSQL::Test::Utils::tmp_check}/race_clients";
make_path($logdir);

my %BUCKET_ID = (USERNAMES => 4, EMAILS => 5, ROUTES => 1);
my @hot;
for my $i (0 .. $nvalues - 1)
{
	my $type = (qw(USERNAMES EMAILS ROUTES))[ $i % 3 ];
	my $value = $type eq 'EMAILS' ? "hot$i\@race.test" : $type eq 'ROUTES' ? "hot/r\x{e9}po-$i" : "hot$i";
	push @hot, { type => $type, value => $value, key => "$BUCKET_ID{$type}:$value" };
}

sub random_uuid
{
	return sprintf('%08x-%04x-4%03x-%04x-%04x%08x',
		int(rand(2**32)), int(rand(2**16)), int(rand(2**12)),
		0x8000 | int(rand(2**14)), int(rand(2**16)), int(rand(2**32)));
}

# One client: cell (c mod 3) + 1; runs until the deadline, then stops.
# Log lines (JSON): {op, ts, te, sqlstate | lost, ...}.
sub client_main
{
	my ($arg) = @_;
	my ($c, $deadline, $file, $cseed) = @$arg;
	srand($cseed);
	my $cell = ($c % 3) + 1;
	open my $log, '>:encoding(UTF-8)', $file or die "open $file: $!";
	$log->autoflush(1);
	my $s = ClaimsFault::Session->new($connstr, timeout => 60);
	$s->connect or die "client $c could not connect";
	my @mine;            # outstanding leases: {lease}
	my @finished;        # finished leases: {lease, how}
	my $last_begin;      # the last successful begin (for retries)
	my %owned;           # values this cell's committed leases left it owning
	my %items_of;        # lease -> its items
	while (time() < $deadline)
	{
		my ($op, $sql);
		my $r = rand();
		if (@mine && ($r < 0.40 || @mine > 2))
		{
			my $i = int(rand(@mine));
			my $l = splice(@mine, $i, 1);
			my $how = rand() < 0.7 ? 'commit' : 'rollback';
			$op = { op => $how, lease => $l->{lease}, cell => $cell };
		}
		elsif (@finished && $r >= 0.40 && $r < 0.44)
		{
			# finish again, the same way (no change) or the other way (55000)
			my $f = $finished[ int(rand(@finished)) ];
			my $how = rand() < 0.5 ? 'commit' : 'rollback';
			$op = { op => $how, lease => $f->{lease}, cell => $cell, again => 1 };
		}
		elsif ($last_begin && $r >= 0.44 && $r < 0.47)
		{
			$op = { %$last_begin, retry => 1 };
		}
		else
		{
			# values this cell believes it owns are destroyed or replaced
			# more often; any value may be asked for
			my @owned = grep { $owned{ $_->{key} } } @hot;
			my @pick = (shuffle @hot)[ 0 .. int(rand(3)) ];
			@pick = ((shuffle @owned)[0], grep { !$owned{ $_->{key} } } @pick[ 1 .. $#pick ])
			  if @owned && rand() < 0.5;
			my (@items, @creates, @destroys);
			for my $h (@pick)
			{
				my $k = rand();
				my $kind = $owned{ $h->{key} }
				  ? ($k < 0.1 ? 'create' : $k < 0.6 ? 'destroy' : 'replace')
				  : ($k < 0.7 ? 'create' : $k < 0.9 ? 'destroy' : 'replace');
				my ($subj, $src) = (1 + int(rand(1e6)), 1 + int(rand(1e9)));
				push @items, { key => $h->{key}, kind => $kind, subj => $subj, src => $src };
				push @creates, metadata($h->{type}, $h->{value}, $subj, $src)
				  if $kind ne 'destroy';
				push @destroys, bucket_only($h->{type}, $h->{value}) if $kind ne 'create';
			}
			my %req = (cell_id => $cell);
			$req{lease_uuid} = random_uuid() if rand() < 0.7;
			$req{create_records} = \@creates if @creates;
			$req{destroy_records} = \@destroys if @destroys;
			$op = { op => 'begin', cell => $cell, items => \@items, json => enc(\%req),
				lease => $req{lease_uuid} };
		}
		if ($op->{op} eq 'begin')
		{
			$sql = 'SELECT claims_begin_update(' . sql_quote($op->{json}) . "::jsonb)->>'lease_uuid'";
		}
		else
		{
			$sql = "SELECT claims_$op->{op}($op->{cell}, '$op->{lease}')";
		}
		my $res = $s->query($sql);
		my %rec = (%$op, ts => $res->{ts}, te => $res->{te});
		if ($res->{lost})
		{
			$rec{lost} = 1;
			$rec{err} = $res->{err};
			print $log enc(\%rec), "\n";
			$s->close;
			$s->connect or last;
			next;
		}
		$rec{sqlstate} = $res->{sqlstate};
		$rec{err} = $res->{err} if $res->{sqlstate} ne '00000';
		if ($op->{op} eq 'begin' && $res->{sqlstate} eq '00000')
		{
			$rec{answer} = $res->{out};
			if (!$op->{retry})
			{
				push @mine, { lease => $res->{out} };
				$items_of{ $res->{out} } = $op->{items};
				$last_begin = { %$op, lease => $res->{out},
					json => $op->{json} };
				# a retry must repeat the request exactly, lease uuid included
				$last_begin = undef unless defined $op->{lease};
			}
		}
		if ($op->{op} ne 'begin' && !$op->{again} && $res->{sqlstate} eq '00000')
		{
			push @finished, { lease => $op->{lease} };
			shift @finished if @finished > 50;
			if ($op->{op} eq 'commit')
			{
				for my $it (@{ delete $items_of{ $op->{lease} } // [] })
				{
					if ($it->{kind} eq 'destroy') { delete $owned{ $it->{key} }; }
					else { $owned{ $it->{key} } = 1; }
				}
			}
			delete $items_of{ $op->{lease} };
		}
		# a value another cell holds is not ours any more
		if ($op->{op} eq 'begin' && $res->{sqlstate} =~ /^(42501|P0002)$/)
		{
			delete $owned{ $_->{key} } for grep { $_->{kind} ne 'create' } @{ $op->{items} };
		}
		print $log enc(\%rec), "\n";
	}
	$s->close;
	close $log;
	return;
}

my $t0 = time();
my $deadline = $t0 + $seconds;
my @files = map { "$logdir/c$_.log" } 0 .. $nclients - 1;
my @pids = run_children(\&client_main,
	map { [ $_, $deadline, $files[$_], int(rand(2**31)) ] } 0 .. $nclients - 1);
my $failed_children = 0;
for my $pid (@pids)
{
	waitpid($pid, 0);
	$failed_children++ if $? != 0;
}
is($failed_children, 0, "all $nclients clients ran to the end");

# ---------------------------------------------------------------------------
# Rebuild the history from the logs.
my (@records, %by_state, @problems);
for my $f (@files)
{
	open my $fh, '<:encoding(UTF-8)', $f or next;
	while (my $line = <$fh>)
	{
		push @records, dec($line);
	}
	close $fh;
}
my ($lost, $deadlocks, @undocumented) = (0, 0);
for my $r (@records)
{
	if ($r->{lost}) { $lost++; next; }
	$by_state{ $r->{sqlstate} }++;
	$deadlocks++ if $r->{sqlstate} eq '40P01';
	push @undocumented, "$r->{op} answered $r->{sqlstate}: " . ($r->{err} // '')
	  unless $documented{ $r->{sqlstate} };
}
diag('answers by SQLSTATE: ' . join(', ', map { "$_=$by_state{$_}" } sort keys %by_state));
is($lost, 0, 'every request was answered (no connection lost, no hang)');
is($deadlocks, 0, 'no deadlock (40P01)');
is(scalar(@undocumented), 0, 'every error is a documented SQLSTATE')
  or diag(join("\n", @undocumented[ 0 .. ($#undocumented < 20 ? $#undocumented : 20) ]));

# Leases that were granted: the first successful begin of each lease uuid.
my %lease;
for my $r (sort { $a->{te} <=> $b->{te} } grep { !$_->{lost} } @records)
{
	next unless $r->{op} eq 'begin';
	if ($r->{sqlstate} eq '00000')
	{
		my $l = $r->{answer};
		push @problems, "begin with lease_uuid $r->{lease} answered lease $l"
		  if defined $r->{lease} && $r->{lease} ne $l;
		if ($lease{$l})
		{
			push @problems, "lease $l granted twice by requests that were not retries"
			  unless $r->{retry};
			next;
		}
		$lease{$l} = { uuid => $l, cell => $r->{cell}, items => $r->{items}, begin => $r };
	}
	elsif ($r->{retry})
	{
		push @problems, "retry of the granted lease $r->{lease} answered $r->{sqlstate}, not the same answer";
	}
}
# Their finishes: the first successful commit or rollback (sent by the
# client that holds the lease, after its begin was answered).
for my $r (sort { $a->{te} <=> $b->{te} } grep { !$_->{lost} } @records)
{
	next if $r->{op} eq 'begin' || $r->{sqlstate} ne '00000';
	my $l = $lease{ $r->{lease} };
	if (!$l)
	{
		push @problems, "$r->{op} of lease $r->{lease} succeeded but the lease was never granted";
		next;
	}
	if (!$l->{finish})
	{
		$l->{finish} = $r;
	}
	elsif ($l->{finish}{op} ne $r->{op})
	{
		push @problems, "lease $l->{uuid} was both committed and rolled back";
	}
}
# "Finish the other way" must have failed with 55000, and never succeeded.
for my $r (grep { !$_->{lost} && $_->{again} } @records)
{
	my $l = $lease{ $r->{lease} } or next;
	my $want = $l->{finish}{op} eq $r->{op} ? '00000' : '55000';
	push @problems, "repeated $r->{op} of lease $l->{uuid} (finished by $l->{finish}{op}) answered $r->{sqlstate}, expected $want"
	  if $r->{sqlstate} ne $want;
}

# Per value: the leases that held it, in their true order.
my %chain;
for my $l (values %lease)
{
	push @{ $chain{ $_->{key} } }, [ $l, $_ ] for @{ $l->{items} };
}
my %expected;
my ($grants, $transitions) = (0, 0);
for my $h (@hot)
{
	my $key = $h->{key};
	my @links = sort { $a->[0]{begin}{te} <=> $b->[0]{begin}{te} } @{ $chain{$key} // [] };
	my %st = (st => 'absent');
	my $prev;
	for my $link (@links)
	{
		my ($l, $it) = @$link;
		$grants++;
		if ($prev)
		{
			if (!$prev->{finish})
			{
				push @problems, "$key: lease $l->{uuid} (cell $l->{cell}) was granted while lease $prev->{uuid} (cell $prev->{cell}) never finished";
			}
			elsif ($l->{begin}{te} < $prev->{finish}{ts})
			{
				push @problems, sprintf('%s: lease %s (cell %d) was granted at %.6f, before lease %s (cell %d) was even asked to finish at %.6f',
					$key, $l->{uuid}, $l->{cell}, $l->{begin}{te}, $prev->{uuid}, $prev->{cell}, $prev->{finish}{ts});
			}
		}
		if ($it->{kind} eq 'create' && $st{st} ne 'absent')
		{
			push @problems, "$key: create by lease $l->{uuid} (cell $l->{cell}) granted while the value was owned by cell $st{cell}";
		}
		elsif ($it->{kind} ne 'create' && ($st{st} ne 'active' || $st{cell} != $l->{cell}))
		{
			push @problems, "$key: $it->{kind} by lease $l->{uuid} (cell $l->{cell}) granted while the value was "
			  . ($st{st} eq 'absent' ? 'not claimed' : "owned by cell $st{cell}");
		}
		my $fin = $l->{finish};
		if (!$fin)
		{
			%st = (st => $it->{kind} eq 'create' ? 'LEASE_CREATING' : 'LEASE_DESTROYING',
				cell => $l->{cell}, lease => $l->{uuid},
				subj => $it->{kind} eq 'create' ? $it->{subj} : $st{subj},
				src => $it->{kind} eq 'create' ? $it->{src} : $st{src},
				rsubj => $it->{kind} eq 'replace' ? $it->{subj} : undef,
				rsrc => $it->{kind} eq 'replace' ? $it->{src} : undef);
		}
		elsif ($fin->{op} eq 'commit')
		{
			$transitions++;
			if ($it->{kind} eq 'destroy') { %st = (st => 'absent'); }
			else
			{
				%st = (st => 'active', cell => $l->{cell}, subj => $it->{subj}, src => $it->{src});
			}
		}
		$prev = $l;
	}
	$expected{$key} = \%st;
}

# The store at the end.
my %actual;
my $out = $node->safe_psql('postgres', q{
SELECT bucket_type || ':' || encode(convert_to(bucket_value, 'UTF8'), 'hex'), status,
       creator_id, coalesce(lease_uuid::text, ''), subject_id, encode(source_id, 'hex'),
       coalesce(replace_subject_id::text, ''), coalesce(encode(replace_source_id, 'hex'), '')
FROM claims});
for my $line (split /\n/, $out)
{
	my ($k, @f) = split /\|/, $line, -1;
	my ($t, $hex) = split /:/, $k, 2;
	my $v = pack('H*', $hex);
	utf8::decode($v);
	$actual{"$t:$v"} = join('|', @f);
}
my $mismatches = 0;
for my $h (@hot)
{
	my $e = $expected{ $h->{key} };
	my $want = $e->{st} eq 'absent' ? 'absent'
	  : join('|', $e->{st} eq 'active' ? 'ACTIVE' : $e->{st}, $e->{cell}, $e->{lease} // '',
		$e->{subj}, sprintf('%016x', $e->{src}), $e->{rsubj} // '',
		defined $e->{rsrc} ? sprintf('%016x', $e->{rsrc}) : '');
	my $got = delete $actual{ $h->{key} } // 'absent';
	if ($want ne $got)
	{
		$mismatches++;
		push @problems, "$h->{key}: the answers say $want, the store holds $got";
	}
}
push @problems, "claim $_ exists but no client asked for it" for sort keys %actual;

# Leases in the store: every granted lease in its state, no failed one.
my %lease_rows = map { my @f = split /\|/; ($f[0] => "$f[1]|$f[2]") }
  split /\n/, $node->safe_psql('postgres', 'SELECT uuid, state, creator_id FROM claim_leases');
for my $l (sort keys %lease)
{
	my $fin = $lease{$l}{finish};
	my $want = ($fin ? ($fin->{op} eq 'commit' ? 'committed' : 'rolled_back') : 'outstanding') . "|$lease{$l}{cell}";
	my $got = delete $lease_rows{$l} // 'absent';
	push @problems, "lease $l: the answers say $want, the store holds $got" if $want ne $got;
}
for my $l (sort keys %lease_rows)
{
	push @problems, "lease $l ($lease_rows{$l}) exists but no begin_update was answered with it";
}

is(scalar(@problems), 0, 'the store agrees with the model rebuilt from the acknowledged answers')
  or diag(join("\n", @problems[ 0 .. ($#problems < 40 ? $#problems : 40) ]));
is($mismatches, 0, "every hot value has the owner its last acknowledged lease gives it");
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty');
is(join("\n", amcheck_failures($node)), '', 'amcheck passes on every index');
is(join("\n", crash_lines_in_log($node)), '', 'no server process crashed');

my $answered = grep { !$_->{lost} } @records;
diag(sprintf('figures: clients=%d values=%d seconds=%.0f operations=%d leases_granted=%d value_grants=%d committed_changes=%d seed=%d',
	$nclients, $nvalues, time() - $t0, $answered, scalar(keys %lease), $grants, $transitions, $seed));

$node->stop;
done_testing();
