
# ClaimsModel.pm: clients with an exact model, for the crash and failover
# tests. Each client works alone on its own values under one cell, so the
# store's state for those values is known exactly from the answers it got;
# the one request in flight when the server died is resolved by looking at
# the store, which must show it applied completely or not at all.
package ClaimsModel;

use strict;
use warnings;

use ClaimsFault;
use Exporter 'import';
use List::Util qw(shuffle);

our @EXPORT = qw(new_model model_client_main check_models actual_state);

# ---------------------------------------------------------------------------
# The model of one client: it works alone on its own values (so its state is
# known exactly), under one cell.
#   values{key} = {st => absent|active|creating|destroying, lease, subj, src,
#                  rsubj, rsrc}
#   leases{uuid} = {state => outstanding|committed|rolled_back|none, items,
#                   json}
# ---------------------------------------------------------------------------

my @BUCKET = ('USERNAMES', 'EMAILS', 'ROUTES');
my %BUCKET_ID = (USERNAMES => 4, EMAILS => 5, ROUTES => 1);

sub new_model
{
	my ($c, $pool_size) = @_;
	$pool_size //= 10;
	my %m = (client => $c, cell => ($c % 3) + 1, values => {}, leases => {});
	for my $i (0 .. $pool_size - 1)
	{
		my $type = $BUCKET[ $i % 3 ];
		my $value = $type eq 'EMAILS' ? "k${c}x$i\@crash.test"
		  : $type eq 'ROUTES' ? "grp-$c/pr\x{f6}j-$i"
		  : "k${c}x$i";
		$m{values}{"$type:$value"} =
		  { type => $type, value => $value, st => 'absent' };
	}
	return \%m;
}

sub random_uuid
{
	return sprintf('%08x-%04x-4%03x-%04x-%04x%08x',
		int(rand(2**32)), int(rand(2**16)), int(rand(2**12)),
		0x8000 | int(rand(2**14)), int(rand(2**16)), int(rand(2**32)));
}

sub deep_copy { return dec(enc($_[0])); }

# The SQLSTATE the store must answer an op with in model state $m.
sub predict
{
	my ($m, $op) = @_;
	if ($op->{kind} eq 'begin')
	{
		my $l = $m->{leases}{ $op->{lease} };
		if ($l && $l->{state} ne 'none')
		{
			return $l->{json} eq $op->{json} ? '00000' : '22023';
		}
		my $worst = 9;
		my %rank = (P0002 => 1, 42501 => 2, 23505 => 3, '55P03' => 4);
		for my $it (@{ $op->{items} })
		{
			my $v = $m->{values}{ $it->{key} };
			my $code;
			if ($it->{kind} eq 'create')
			{
				$code = $v->{st} eq 'absent' ? undef
				  : $v->{st} eq 'active' ? '23505'
				  : '55P03';
			}
			else
			{
				$code = $v->{st} eq 'absent' ? 'P0002'
				  : $v->{st} eq 'active' ? undef
				  : '55P03';
			}
			$worst = $rank{$code} if defined $code && $rank{$code} < $worst;
		}
		my %code = reverse %rank;
		return $worst == 9 ? '00000' : $code{$worst};
	}
	my $l = $m->{leases}{ $op->{lease} };
	return 'P0002' if !$l || $l->{state} eq 'none';
	return '42501' if $op->{cell} != $m->{cell};
	return '55000' if $op->{kind} eq 'commit' && $l->{state} eq 'rolled_back';
	return '55000' if $op->{kind} eq 'rollback' && $l->{state} eq 'committed';
	return '00000';
}

# Apply an op that the store answered with $code.
sub apply_op
{
	my ($m, $op, $code) = @_;
	if ($op->{kind} eq 'begin')
	{
		my $l = $m->{leases}{ $op->{lease} };
		if ($code ne '00000')
		{
			$m->{leases}{ $op->{lease} } //=
			  { state => 'none', json => $op->{json}, items => [] };
			return;
		}
		return if $l && $l->{state} ne 'none';    # repeated begin: no change
		$m->{leases}{ $op->{lease} } =
		  { state => 'outstanding', json => $op->{json}, items => $op->{items} };
		for my $it (@{ $op->{items} })
		{
			my $v = $m->{values}{ $it->{key} };
			$v->{lease} = $op->{lease};
			if ($it->{kind} eq 'create')
			{
				@$v{qw(st subj src)} = ('creating', $it->{subj}, $it->{src});
			}
			else
			{
				$v->{st} = 'destroying';
				@$v{qw(rsubj rsrc)} = ($it->{subj}, $it->{src})
				  if $it->{kind} eq 'replace';
			}
		}
		return;
	}
	return if $code ne '00000';
	my $l = $m->{leases}{ $op->{lease} };
	return if $l->{state} ne 'outstanding';
	my $commit = $op->{kind} eq 'commit';
	$l->{state} = $commit ? 'committed' : 'rolled_back';
	for my $it (@{ $l->{items} })
	{
		my $v = $m->{values}{ $it->{key} };
		delete $v->{lease};
		if ($it->{kind} eq 'create')
		{
			$v->{st} = $commit ? 'active' : 'absent';
		}
		elsif ($it->{kind} eq 'destroy')
		{
			$v->{st} = $commit ? 'absent' : 'active';
		}
		else
		{
			$v->{st} = 'active';
			@$v{qw(subj src)} = ($v->{rsubj}, $v->{rsrc}) if $commit;
		}
		delete @$v{qw(rsubj rsrc)};
		delete @$v{qw(subj src)} if $v->{st} eq 'absent';
	}
	return;
}

# A random next op for model $m.
sub next_op
{
	my ($m) = @_;
	my @outstanding = grep { $m->{leases}{$_}{state} eq 'outstanding' } sort keys %{ $m->{leases} };
	my @finished = grep { $m->{leases}{$_}{state} =~ /^(committed|rolled_back)$/ } sort keys %{ $m->{leases} };
	my $r = rand();
	if (@outstanding && ($r < 0.40 || @outstanding > 3))
	{
		my $l = $outstanding[ int(rand(@outstanding)) ];
		my $kind = rand() < 0.65 ? 'commit' : 'rollback';
		my $cell = rand() < 0.03 ? ($m->{cell} % 3) + 1 : $m->{cell};
		return { kind => $kind, lease => $l, cell => $cell };
	}
	if (@finished && $r < 0.46)
	{
		my $l = $finished[ int(rand(@finished)) ];
		return { kind => rand() < 0.5 ? 'commit' : 'rollback', lease => $l, cell => $m->{cell} };
	}
	if ($r < 0.48)
	{
		return { kind => 'commit', lease => random_uuid(), cell => $m->{cell} };
	}

	# begin_update on 1 to 3 values; mostly valid, sometimes conflicting
	my @keys = sort keys %{ $m->{values} };
	my $conflict = rand() < 0.15;
	my @pick;
	for my $k (shuffle @keys)
	{
		my $v = $m->{values}{$k};
		my $free = $v->{st} eq 'absent' || $v->{st} eq 'active';
		next if !$free && !$conflict;
		push @pick, $k;
		last if @pick >= 1 + int(rand(3));
	}
	return next_op_commit_any($m) unless @pick;
	my (@items, @creates, @destroys);
	for my $k (@pick)
	{
		my $v = $m->{values}{$k};
		my ($subj, $src) = (1 + int(rand(1e6)), 1 + int(rand(1e9)));
		my $kind;
		if ($v->{st} eq 'absent')
		{
			$kind = $conflict && rand() < 0.3 ? 'destroy' : 'create';
		}
		elsif ($v->{st} eq 'active')
		{
			my $r2 = rand();
			$kind = $conflict && $r2 < 0.3 ? 'create' : $r2 < 0.6 ? 'destroy' : 'replace';
		}
		else
		{
			$kind = rand() < 0.5 ? 'create' : 'destroy';
		}
		push @items, { key => $k, kind => $kind, subj => $subj, src => $src };
		push @creates, metadata($v->{type}, $v->{value}, $subj, $src)
		  if $kind eq 'create' || $kind eq 'replace';
		push @destroys, bucket_only($v->{type}, $v->{value})
		  if $kind eq 'destroy' || $kind eq 'replace';
	}
	my $lease = random_uuid();
	my %req = (cell_id => $m->{cell}, lease_uuid => $lease);
	$req{create_records} = \@creates if @creates;
	$req{destroy_records} = \@destroys if @destroys;
	return { kind => 'begin', lease => $lease, cell => $m->{cell}, items => \@items, json => enc(\%req) };
}

sub next_op_commit_any
{
	my ($m) = @_;
	return { kind => 'commit', lease => random_uuid(), cell => $m->{cell} };
}

sub op_sql
{
	my ($op) = @_;
	return 'SELECT claims_begin_update(' . sql_quote($op->{json}) . '::jsonb)'
	  if $op->{kind} eq 'begin';
	return "SELECT claims_$op->{kind}($op->{cell}, '$op->{lease}')";
}

# ---------------------------------------------------------------------------
# A client process: replays $retry first (the op lost in the last crash),
# then random ops until its connection dies. Log lines: "S <op json>" before
# sending, "R <sqlstate>" or "L" (lost) after.
# ---------------------------------------------------------------------------
sub model_client_main
{
	my ($arg) = @_;
	my ($connstr, $m, $retry, $file, $cseed) = @$arg;
	srand($cseed);
	open my $log, '>:encoding(UTF-8)', $file or die "open $file: $!";
	$log->autoflush(1);
	my $s = ClaimsFault::Session->new($connstr, timeout => 60);
	return unless $s->connect;
	my $op = $retry;
	for (;;)
	{
		$op //= next_op($m);
		print $log 'S ', enc($op), "\n";
		my $r = $s->query(op_sql($op));
		if ($r->{lost})
		{
			print $log "L\n";
			last;
		}
		print $log "R $r->{sqlstate}\n";
		apply_op($m, $op, $r->{sqlstate});
		$op = undef;
	}
	$s->close;
	close $log;
	return;
}

# Read a client log: the answered ops and the op in flight (if any).
sub read_log
{
	my ($file) = @_;
	my (@answered, $pending);
	open my $fh, '<:encoding(UTF-8)', $file or return ([], undef);
	while (my $line = <$fh>)
	{
		chomp $line;
		if ($line =~ /^S (.*)$/) { $pending = dec($1); }
		elsif ($line =~ /^R (\w+)$/ && $pending)
		{
			push @answered, [ $pending, $1 ];
			$pending = undef;
		}
		elsif ($line eq 'L') { }
	}
	close $fh;
	return (\@answered, $pending);
}

# Expected rows of a model: claims lines keyed by "type:value", and leases.
sub expected_state
{
	my ($m) = @_;
	my (%claims, %leases);
	for my $k (sort keys %{ $m->{values} })
	{
		my $v = $m->{values}{$k};
		next if $v->{st} eq 'absent';
		my $status = { active => 'ACTIVE', creating => 'LEASE_CREATING', destroying => 'LEASE_DESTROYING' }->{ $v->{st} };
		$claims{$k} = join('|', $status, $v->{lease} // '', $m->{cell}, $v->{subj},
			sprintf('%016x', $v->{src}), $v->{rsubj} // '',
			defined $v->{rsrc} ? sprintf('%016x', $v->{rsrc}) : '');
	}
	for my $l (sort keys %{ $m->{leases} })
	{
		my $st = $m->{leases}{$l}{state};
		$leases{$l} = $st eq 'none' ? undef : "$st|$m->{cell}";
	}
	return (\%claims, \%leases);
}

# The store's rows: claims keyed by "type:value", leases by uuid.
sub actual_state
{
	my ($node) = @_;
	my (%claims, %leases);
	my %type_name = reverse %BUCKET_ID;
	my $out = $node->safe_psql('postgres', q{
SELECT bucket_type, status, coalesce(lease_uuid::text, ''), creator_id, subject_id,
       encode(source_id, 'hex'), coalesce(replace_subject_id::text, ''),
       coalesce(encode(replace_source_id, 'hex'), ''), encode(convert_to(bucket_value, 'UTF8'), 'hex')
FROM claims});
	for my $line (split /\n/, $out)
	{
		my @f = split /\|/, $line, -1;
		my $value = pack('H*', $f[8]);
		utf8::decode($value);
		my $key = ($type_name{ $f[0] } // "type$f[0]") . ":$value";
		$claims{$key} = join('|', @f[ 1 .. 7 ]);
	}
	$out = $node->safe_psql('postgres',
		q{SELECT uuid, state, creator_id FROM claim_leases});
	for my $line (split /\n/, $out)
	{
		my @f = split /\|/, $line;
		$leases{ $f[0] } = "$f[1]|$f[2]";
	}
	return (\%claims, \%leases);
}

# Differences between a model's expectation and the store (for one client).
sub diff_state
{
	my ($m, $actual_claims, $actual_leases) = @_;
	my ($ec, $el) = expected_state($m);
	my @d;
	for my $k (sort keys %{ $m->{values} })
	{
		my ($e, $a) = ($ec->{$k}, $actual_claims->{$k});
		push @d, "claim $k: expected " . ($e // 'absent') . ', found ' . ($a // 'absent')
		  if ($e // '') ne ($a // '');
	}
	for my $l (sort keys %$el)
	{
		my ($e, $a) = ($el->{$l}, $actual_leases->{$l});
		push @d, "lease $l: expected " . ($e // 'absent') . ', found ' . ($a // 'absent')
		  if ($e // '') ne ($a // '');
	}
	return @d;
}

# Check the store against the models after the clients stopped: replay
# each client's answered requests (each answer must be the predicted one),
# resolve its request in flight, and compare every value and lease. Updates
# the models and the requests to retry; returns the problems found.
# $ignore = {leases => {uuid => 1}, claims => {"TYPE:value" => 1}} names
# rows made before the clients ran.
sub check_models
{
	my ($node, $models, $files, $retry, $label, $stats, $ignore) = @_;
	$ignore //= { leases => {}, claims => {} };
	my $nclients = scalar(@$models);
	my @models = @$models;
	my @files = @$files;
	my @problems;
	my ($ac, $al) = actual_state($node);
	my %leases_known;
	for my $c (0 .. $nclients - 1)
	{
		my $m = $models[$c];
		my ($answered, $pending) = read_log($files[$c]);
		for my $a (@$answered)
		{
			my ($op, $code) = @$a;
			my $want = predict($m, $op);
			push @problems, "$label client $c: $op->{kind} $op->{lease} answered $code, expected $want"
			  if $code ne $want;
			apply_op($m, $op, $code);
			$stats->{answers_checked}++;
		}
		$retry->[$c] = undef;
		if ($pending)
		{
			# the op in flight: applied completely or not at all
			my $after = deep_copy($m);
			apply_op($after, $pending, predict($after, $pending));
			my @d_before = diff_state($m, $ac, $al);
			my @d_after = diff_state($after, $ac, $al);
			my $noop = enc([ expected_state($m) ]) eq enc([ expected_state($after) ]);
			if (!@d_after)
			{
				$models[$c] = $m = $after;
				$stats->{ $noop ? 'inflight_no_change' : 'inflight_applied' }++;
			}
			elsif (!@d_before)
			{
				# not applied: a begin's lease uuid stays unused
				$m->{leases}{ $pending->{lease} } //= { state => 'none', json => $pending->{json}, items => [] }
				  if $pending->{kind} eq 'begin';
				$stats->{inflight_not_applied}++;
			}
			else
			{
				push @problems,
				  "$label client $c: in-flight $pending->{kind} $pending->{lease} half applied; against the state without it:",
				  (map { "  $_" } @d_before), 'against the state with it:', (map { "  $_" } @d_after);
			}
			$retry->[$c] = $pending;
		}
		else
		{
			push @problems, map { "$label client $c: $_" } diff_state($m, $ac, $al);
		}
		$leases_known{$_} = 1 for keys %{ $m->{leases} };
	}
	# nothing in the store that no client asked for
	for my $l (sort keys %$al)
	{
		push @problems, "$label: lease $l exists but no client began it"
		  unless $leases_known{$l} || $ignore->{leases}{$l};
	}
	my %keys_known = map { my $m = $_; map { ($_ => 1) } keys %{ $m->{values} } } @models;
	for my $k (sort keys %$ac)
	{
		push @problems, "$label: claim $k exists but no client made it"
		  unless $keys_known{$k} || $ignore->{claims}{$k};
	}

	@$models = @models;
	return @problems;
}

1;
