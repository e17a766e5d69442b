
# A bounded run of everything at once: cells work while the store's cached
# state keeps changing under them.
#
# Clients, each one connection (reopened only if lost):
#  - two cells (their own roles, not administrators) loop over
#    claims_begin_update (creates of their own values, of a few values both
#    want, and of values of bucket types the operator adds and renames;
#    destroys of their values), claims_commit / claims_rollback,
#    claims_get_record, claims_list_records and claims_list_leases;
#  - a third cell's role looks up that cell's values and pages through its
#    records, comparing every answer with a reference read (a new
#    connection for every pass, as a reconciler run does);
# while
#  - an ordinary role creates and drops temporary tables in a tight loop;
#  - an operator adds bucket types, renames them (UPDATE of the name, the
#    old name kept as an alias, as docs/store-api.md describes) and disables and
#    re-enables the cells with claims_set_cell_disabled.
#
# Every answer's SQLSTATE is recorded. Afterwards: every SQLSTATE is one of
# the error table of docs/store-api.md, no connection was lost and no server process
# crashed, the third cell's answers were all exact (or 42501 while it was
# disabled), and, once the operator is done, every client's next calls see
# the final state: all cells enabled, every added type accepted by its
# current name, by each older name and by number. Every lease is finished,
# claims_check() is empty and amcheck passes.
#
# Environment: CLAIMS_SEED (replay), CLAIMS_CHURN_RUN_SECONDS (default 60).
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

my $seed = claims_seed();
my $seconds = env_num('CLAIMS_CHURN_RUN_SECONDS', 60);
my %documented = map { $_ => 1 } qw(00000 23505 55P03 P0002 42501 55000 22023 40001 22004 54000 25006);
my @cells = ([ 31, 'churn_cell_a' ], [ 32, 'churn_cell_b' ]);
my ($ref_cell, $ref_role, $nsources, $prefix) = (33, 'churn_cell_c', 600, 'steady');

my $node = new_claims_node('churn', conf => "restart_after_crash = on\n");
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/churn";
make_path($dir);

$node->safe_psql('postgres', join("\n",
	'CREATE ROLE churn_temp LOGIN;',
	'SET client_min_messages = warning;',
	map { ("CREATE ROLE $_->[1] LOGIN;", "SELECT claims_register_cell($_->[0], 'cell-$_->[0]', '$_->[1]');") }
	  @cells, [ $ref_cell, $ref_role ]));
load_source_records($node, $ref_cell, $nsources, $prefix);

# The steady cell's records, read before the churn and checked.
my $ref_session = ClaimsFault::Session->new(as_role($node, $ref_role));
$ref_session->connect or die 'cannot connect';
my ($pages, $listed) = read_reference($ref_session, $ref_cell);
$ref_session->close;
is_deeply($listed, [ expected_listing($nsources, $prefix) ], 'the reference read lists the steady cell\'s records');
my %steady;    # username => "cell status uuid" as the router answers it
for my $line (split /\n/, $node->safe_psql('postgres',
		"SELECT bucket_value, uuid FROM claims WHERE creator_id = $ref_cell AND bucket_type = 4"))
{
	my ($v, $uuid) = split /\|/, $line;
	$steady{$v} = "$ref_cell ACTIVE $uuid";
}
is(scalar(keys %steady), $nsources, 'the steady cell owns its usernames');
my @steady = sort keys %steady;

# ---------------------------------------------------------------------------
# Calls, and the record of their answers.

# One log line per answer that is not 00000, and counts per function and
# SQLSTATE ("lost" when the connection was lost).
sub recorder
{
	my ($file) = @_;
	open my $log, '>', "$file.log" or die "open $file.log: $!";
	$log->autoflush(1);
	return { log => $log, counts => {}, file => $file, problems => 0 };
}

sub call
{
	my ($rec, $s, $fn, $sql) = @_;
	my $r = $s->query($sql);
	my $state = $r->{lost} ? 'lost' : $r->{sqlstate};
	$rec->{counts}{"$fn $state"}++;
	if ($state ne '00000')
	{
		my $err = ($r->{err} // '') =~ s/\s+/ /gr;
		print { $rec->{log} } "$fn|$state|$err\n";
		if ($r->{lost})
		{
			# reconnect (the server may be restarting after a crash)
			$s->close;
			my $until = time() + 60;
			sleep(0.2) until $s->connect || time() > $until;
		}
	}
	return ($state, $r->{out});
}

sub problem
{
	my ($rec, $what) = @_;
	$rec->{problems}++;
	print { $rec->{log} } "PROBLEM||$what\n";
	return;
}

sub finish_recorder
{
	my ($rec, %extra) = @_;
	close $rec->{log};
	write_summary($rec->{file}, problems => $rec->{problems}, %extra,
		map { ('count:' . (s/ /_/gr) => $rec->{counts}{$_}) } keys %{ $rec->{counts} });
	return;
}

# Metadata of a create; a bucket type given by number is sent as a JSON
# number (a string of digits is not an enum value in proto3 JSON).
sub md
{
	my ($type, $value, $subject, $source) = @_;
	$type = 0 + $type if $type =~ /^\d+$/;
	return metadata($type, $value, $subject, $source);
}

sub begin_sql
{
	my ($req) = @_;
	return 'SELECT claims_begin_update(' . sql_quote(enc($req)) . "::jsonb)->>'lease_uuid'";
}

sub lookup_sql
{
	my ($value) = @_;
	my $req = sql_quote(enc({ bucket => { type => 'USERNAMES', value => $value } }));
	return "SELECT coalesce((SELECT (r->'record'->>'cell_id') || ' ' || (r->'record'->>'status') || ' ' || "
	  . "(r->'record'->>'uuid') FROM (SELECT claims_get_record(${req}::jsonb) AS r OFFSET 0) s), 'unclaimed')";
}

# The added bucket types as the registry table has them: [id, name, aliases].
sub added_types
{
	my ($rec, $s) = @_;
	my ($st, $out) = call($rec, $s, 'registry read',
		q{SELECT type_id, name, array_to_string(aliases, ' ') FROM claim_bucket_types WHERE type_id >= 100 ORDER BY 1});
	return () if $st ne '00000';
	return map { my ($id, $name, $aliases) = split /\|/, $_, -1; [ $id, $name, [ split / /, $aliases ] ] }
	  grep { $_ ne '' } split /\n/, $out;
}

# Wait for the operator's final state (all cells enabled, types final).
sub wait_for_operator
{
	my $until = time() + 120;
	sleep(0.1) while !-e "$dir/operator.done" && time() < $until;
	return -e "$dir/operator.done";
}

# ---------------------------------------------------------------------------
# A working cell.
sub cell_main
{
	my ($arg) = @_;
	my ($cell, $role, $deadline, $cseed) = @$arg;
	srand($cseed);
	my $rec = recorder("$dir/cell$cell");
	my $s = ClaimsFault::Session->new(as_role($node, $role), timeout => 120);
	$s->connect or die "cell $cell cannot connect";
	my (%mine, @unfinished, @types);    # committed values => type; leases to finish
	my $n = 0;
	while (time() < $deadline)
	{
		my $x = rand();
		$n++;
		if ($x < 0.40)
		{
			# creates: own values, a hot value both cells want, added types
			@types = added_types($rec, $s) if $n % 10 == 1;
			my @creates;
			for (1 .. 1 + int(rand(3)))
			{
				my $y = rand();
				if ($y < 0.2) { push @creates, [ 'USERNAMES', 'hot-' . int(rand(5)) ]; }
				elsif ($y < 0.6 && @types)
				{
					my $t = $types[ int(rand(@types)) ];
					my @names = ($t->[1], @{ $t->[2] }, $t->[0] + 0);
					push @creates, [ $names[ int(rand(@names)) ], "c$cell-$n-" . scalar(@creates) ];
				}
				else { push @creates, [ 'USERNAMES', "c$cell-$n-" . scalar(@creates) ]; }
			}
			my %seen;
			@creates = grep { !$seen{"$_->[0] $_->[1]"}++ } @creates;
			my ($st, $lease) = call($rec, $s, 'claims_begin_update', begin_sql({ cell_id => $cell,
				create_records => [ map { md($_->[0], $_->[1], $n, $n) } @creates ] }));
			next if $st ne '00000';
			if (rand() < 0.7)
			{
				my ($cst) = call($rec, $s, 'claims_commit', "SELECT claims_commit($cell, '$lease')");
				if ($cst eq '00000') { $mine{"$_->[0]\t$_->[1]"} = 1 for @creates; }
				else { push @unfinished, $lease; }
			}
			else
			{
				my ($rst) = call($rec, $s, 'claims_rollback', "SELECT claims_rollback($cell, '$lease')");
				push @unfinished, $lease if $rst ne '00000';
			}
		}
		elsif ($x < 0.50 && %mine)
		{
			# destroy one of its values
			my @keys = sort keys %mine;
			my ($type, $value) = split /\t/, $keys[ int(rand(@keys)) ];
			my ($st, $lease) = call($rec, $s, 'claims_begin_update',
				begin_sql({ cell_id => $cell, destroy_records => [ bucket_only($type =~ /^\d+$/ ? 0 + $type : $type, $value) ] }));
			next if $st ne '00000';
			my ($cst) = call($rec, $s, 'claims_commit', "SELECT claims_commit($cell, '$lease')");
			if ($cst eq '00000') { delete $mine{"$type\t$value"}; }
			else { push @unfinished, $lease; }
		}
		elsif ($x < 0.65)
		{
			# look up a value of the steady cell: always the same answer
			my $v = $steady[ int(rand(@steady)) ];
			my ($st, $out) = call($rec, $s, 'claims_get_record', lookup_sql($v));
			problem($rec, "lookup of $v answered '$out', expected '$steady{$v}'")
			  if $st eq '00000' && $out ne $steady{$v};
		}
		elsif ($x < 0.75)
		{
			call($rec, $s, 'claims_list_records', page_sql(page_request($cell)));
		}
		elsif ($x < 0.85)
		{
			call($rec, $s, 'claims_list_leases',
				'SELECT claims_list_leases(' . sql_quote(enc({ cell_id => $cell })) . ') IS NOT NULL');
		}
		elsif (@unfinished)
		{
			# leases a refusal left outstanding (repeatable, so retried)
			my $lease = shift @unfinished;
			my ($st) = call($rec, $s, 'claims_rollback', "SELECT claims_rollback($cell, '$lease')");
			push @unfinished, $lease if $st ne '00000' && $st ne '55000';
		}
	}

	# The operator is done: all cells are enabled, the types final. This
	# session's next calls must see that.
	my %final = (probe_failures => 0);
	if (!wait_for_operator())
	{
		problem($rec, 'the operator did not finish');
	}
	else
	{
		for my $lease (@unfinished)
		{
			my ($st) = call($rec, $s, 'probe', "SELECT claims_rollback($cell, '$lease')");
			if ($st ne '00000' && $st ne '55000') { $final{probe_failures}++; problem($rec, "final rollback of $lease: $st"); }
		}
		my @probe;
		for my $t (added_types($rec, $s))
		{
			push @probe, map { [ $_, "probe-$cell-$t->[0]-" . scalar(@probe) . '-' . $_ ] } ($t->[1], @{ $t->[2] });
			push @probe, [ $t->[0] + 0, "probe-$cell-$t->[0]-number" ];
		}
		push @probe, [ 'USERNAMES', "probe-$cell-username" ];
		for my $p (@probe)
		{
			my ($st, $lease) = call($rec, $s, 'probe', begin_sql({ cell_id => $cell,
				create_records => [ md($p->[0], $p->[1], 1, 1) ] }));
			if ($st ne '00000')
			{
				$final{probe_failures}++;
				problem($rec, "final begin_update with bucket type $p->[0]: $st");
				next;
			}
			my ($rst) = call($rec, $s, 'probe', "SELECT claims_rollback($cell, '$lease')");
			if ($rst ne '00000') { $final{probe_failures}++; problem($rec, "final rollback: $rst"); }
		}
		$final{probes} = scalar(@probe);
	}
	$s->close;
	finish_recorder($rec, %final);
	return;
}

# The steady cell's role: lookups and paging, every answer exact (or 42501
# while the cell is disabled), on a new connection for every pass.
sub steady_main
{
	my ($arg) = @_;
	my ($deadline, $cseed) = @$arg;
	srand($cseed);
	my $rec = recorder("$dir/steady");
	my $s = ClaimsFault::Session->new(as_role($node, $ref_role), timeout => 120);
	$s->connect or die 'the steady cell cannot connect';
	my $check = sub {
		my ($final) = @_;
		my $v = $steady[ int(rand(@steady)) ];
		my ($st, $out) = call($rec, $s, $final ? 'probe' : 'claims_get_record', lookup_sql($v));
		problem($rec, "lookup of $v answered $st '$out', expected '$steady{$v}'")
		  if ($st eq '00000' || $final) && ($out // '') ne $steady{$v};
		for my $i (0 .. $#$pages)
		{
			my ($pst, $pout) = call($rec, $s, $final ? 'probe' : 'claims_list_records', page_sql($pages->[$i]{req}));
			problem($rec, "page $i answered $pst '" . ($pout // '') . "', expected '$pages->[$i]{answer}'")
			  if ($pst eq '00000' || $final) && ($pout // '') ne $pages->[$i]{answer};
		}
	};
	# a pass over everything per connection, as a reconciler run does
	while (time() < $deadline)
	{
		$check->(0);
		$s->close;
		my $until = time() + 60;
		sleep(0.2) until $s->connect || time() > $until;
	}
	if (wait_for_operator()) { $check->(1); }
	else { problem($rec, 'the operator did not finish'); }
	$s->close;
	finish_recorder($rec);
	return;
}

# The operator: adds and renames bucket types, disables and re-enables
# cells, then leaves everything enabled.
sub operator_main
{
	my ($arg) = @_;
	my ($deadline, $cseed) = @$arg;
	srand($cseed);
	my $rec = recorder("$dir/operator");
	my $s = ClaimsFault::Session->new($node->connstr('postgres'), timeout => 120);
	$s->connect or die 'the operator cannot connect';
	my %did = map { ($_ => 0) } qw(added renamed disabled);
	my $ntypes = 0;
	my @all_cells = ((map { $_->[0] } @cells), $ref_cell);
	while (time() < $deadline)
	{
		my $x = rand();
		if ($x < 0.15 && $ntypes < 6 || $ntypes == 0)
		{
			my $id = 100 + $ntypes;
			my ($st) = call($rec, $s, 'add type', "INSERT INTO claim_bucket_types (type_id, name, claim_field) "
				  . "VALUES ($id, 'CHURN_T${id}_V0', 'churn_t$id')");
			if ($st eq '00000') { $ntypes++; $did{added}++; }
		}
		elsif ($x < 0.80)
		{
			my $id = 100 + int(rand($ntypes));
			my ($st) = call($rec, $s, 'rename type', "UPDATE claim_bucket_types SET "
				  . "name = 'CHURN_T${id}_V' || (coalesce(cardinality(aliases), 0) + 1), aliases = aliases || name "
				  . "WHERE type_id = $id");
			$did{renamed}++ if $st eq '00000';
		}
		else
		{
			my $cell = $all_cells[ int(rand(@all_cells)) ];
			my ($st) = call($rec, $s, 'disable cell', "SELECT claims_set_cell_disabled($cell, true, 'churn')");
			$did{disabled}++ if $st eq '00000';
			sleep(0.05 + rand(0.2));
			call($rec, $s, 'enable cell', "SELECT claims_set_cell_disabled($cell, false, 'churn')");
		}
		sleep(0.02 + rand(0.1));
	}
	# the final state: every cell enabled
	for my $cell (@all_cells)
	{
		my ($st) = call($rec, $s, 'enable cell', "SELECT claims_set_cell_disabled($cell, false, 'churn end')");
		problem($rec, "could not enable cell $cell: $st") if $st ne '00000';
	}
	$s->close;
	finish_recorder($rec, %did);
	open my $fh, '>', "$dir/operator.done" or die;
	close $fh;
	return;
}

# ---------------------------------------------------------------------------
my $offset = log_offset($node);
my $identity = server_identity($node);
my $sentinel = ClaimsFault::Session->new($node->connstr('postgres'));
$sentinel->connect or die 'sentinel cannot connect';
my $sentinel_pid = $sentinel->query('SELECT pg_backend_pid()')->{out};

my $t0 = time();
my $deadline = $t0 + $seconds;
my @pids = (
	run_children(\&cell_main, map { [ $_->[0], $_->[1], $deadline, int(rand(2**31)) ] } @cells),
	run_children(\&steady_main, [ $deadline, int(rand(2**31)) ]),
	run_children(\&operator_main, [ $deadline, int(rand(2**31)) ]),
	run_children(sub { temp_table_churn(as_role($node, 'churn_temp'), $deadline, "$dir/temp") }, 1));
my $failed_children = 0;
for my $pid (@pids)
{
	waitpid($pid, 0);
	$failed_children++ if $? != 0;
}
is($failed_children, 0, 'every client and churner ran to the end');
$node->poll_query_until('postgres', 'SELECT true') or die 'the server does not answer any more';

# ---------------------------------------------------------------------------
my (%by_state, @undocumented, $problems);
my %op = read_summary("$dir/operator");
my %temp = read_summary("$dir/temp");
diag(sprintf('%.0f s: operator added %s, renamed %s, disabled %s times; %s temporary tables',
	$seconds, map { $_ // '?' } @op{qw(added renamed disabled)}, $temp{temp_tables}));
ok(($op{added} // 0) > 0 && ($op{renamed} // 0) > 0 && ($op{disabled} // 0) > 0,
	'the operator added and renamed types and disabled cells');
ok(($temp{temp_tables} // 0) > 0 || ($temp{lost} // 0) > 0, 'the ordinary role created temporary tables');
for my $who ((map { "cell$_->[0]" } @cells), 'steady', 'operator')
{
	my %sum = read_summary("$dir/$who");
	ok(%sum, "$who wrote its summary");
	$problems += $sum{problems} // 0;
	for my $k (grep { /^count:/ } keys %sum)
	{
		my ($fn, $state) = $k =~ /^count:(.*)_(\S+)$/;
		$by_state{$state} += $sum{$k};
		push @undocumented, "$who: $fn answered $state x$sum{$k}"
		  unless $documented{$state} || ($who eq 'operator' && $state eq '00000');
	}
	if (-s "$dir/$who.log")
	{
		my @bad = grep { my ($fn, $state) = split /\|/; $fn eq 'PROBLEM' || !$documented{$state} }
		  split /\n/, slurp_file("$dir/$who.log");
		diag("$who, first unexpected answers:\n" . join("\n", @bad[ 0 .. ($#bad < 5 ? $#bad : 5) ])) if @bad;
	}
	if ($who =~ /^cell/)
	{
		cmp_ok($sum{probes} // 0, '>', 1, "$who probed the final state");
		is($sum{probe_failures} // 'none', 0,
			"$who sees the final state at its next calls (cells enabled, every type by every name)");
	}
}
diag('answers by SQLSTATE: ' . join(', ', map { "$_=$by_state{$_}" } sort keys %by_state));
cmp_ok($by_state{'00000'} // 0, '>', 100, 'the clients got answers');
is(join("\n", @undocumented), '', 'every SQLSTATE is one of the documented ones, no connection was lost');
is($problems, 0, 'every answer of a steady value or page was exact, every final probe succeeded');

my @evidence = restart_evidence($node, $offset);
is(scalar(@evidence), 0, 'no server process crashed and the server never went through crash recovery')
  or diag(join("\n", @evidence[ 0 .. ($#evidence < 10 ? $#evidence : 10) ]));
my $after = $sentinel->query('SELECT pg_backend_pid()');
ok(!$after->{lost} && ($after->{out} // '') eq $sentinel_pid,
	'a session opened before the run is still connected to the same backend');
$sentinel->close;
is(server_identity($node), $identity, 'same postmaster, same start time');

is($node->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'every lease was finished');
is($node->safe_psql('postgres', 'SELECT count(*) FROM claim_cells WHERE disabled'), '0', 'every cell is enabled');
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty');
is(join("\n", amcheck_failures($node)), '', 'amcheck passes on every index');

done_testing();
