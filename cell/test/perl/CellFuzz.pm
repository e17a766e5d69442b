# CellFuzz: the randomized invariant test of the cell side
# (cell/test/t/066_random_invariants.pl): the claimed schema every cell
# gets, a generator of random transactions over it, a client loop that runs
# them and counts what it can know of their outcomes, and the checker of
# the invariants that must hold once every fault has stopped and the cells
# have settled. The checker reads the cells' tables and the store's tables
# directly; the generator's counts are figures, never evidence.
#
# The generator's choices depend only on the seed and the client's number,
# never on outcomes or timing, so CLAIMS_SEED replays every client's
# sequence of transactions (not the moments at which faults hit them).
package CellFuzz;

use strict;
use warnings;

use Exporter 'import';
use JSON::PP ();
use Time::HiRes ();
use PostgreSQL::Test::Utils;
use CellNodes qw(sql_state);
use ClaimsFault ();

our @EXPORT = qw(setup_fuzz_schema random_transaction run_client retire_legacy
  settle_cell verify_cell check_invariants);

# Values the clients race for: a small pool, so cells and tables collide.
my @NAMES = map { sprintf('v%02d', $_) } 0 .. 23;
my @KEYS = map { sprintf('k%02d', $_) } 0 .. 13;
# The legacy table's values: once its column is retired they stay claimed,
# so it shares only a quarter of the names, lest the whole pool freeze.
my @LEGACY = (@NAMES[ 18 .. 23 ], map { "w$_" } 0 .. 5);

# Setup of one cell database (run as the superuser after add_cell): the
# tables, their declarations, the delegated role's table, the partitioned
# table ($route 'parent': through its parent; 'partitions': partition by
# partition, as before 1.5, with other source types) and an inheritance
# child (refused). Returns a hash of what the declarations answered:
# partitioned => 'parent' or 'partitions', parent_state, inherit_state.
# The role app must exist on the node.
sub setup_fuzz_schema
{
	my ($node, $db, $route) = @_;
	my %r;
	$node->safe_psql($db, q{
GRANT CREATE ON SCHEMA public TO app;
GRANT USAGE ON SCHEMA claims_cell TO app;
GRANT EXECUTE ON FUNCTION claims_cell.claim_column(regclass, name, text, text, name, text, boolean, boolean),
                          claims_cell.set_claiming(regclass, name, boolean),
                          claims_cell.unclaim_column(regclass, name) TO app;
CREATE TABLE users (id bigint PRIMARY KEY, username text, note text);
CREATE UNIQUE INDEX users_username ON users (username);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE orgs (id bigint PRIMARY KEY, path text, note text);
CREATE INDEX orgs_path ON orgs (path);
SELECT claims_cell.claim_column('orgs', 'path', 'USERNAMES', 'NAMESPACE', 'id', 'RAILS_TABLE_NAMESPACES',
                                "deferrable" => true, initially_deferred => true);
CREATE TABLE legacy (id bigint PRIMARY KEY, name text, note text);
CREATE INDEX legacy_name ON legacy (name);
SELECT claims_cell.claim_column('legacy', 'name', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_SNIPPETS');
SET ROLE app;
CREATE TABLE handles (id bigint PRIMARY KEY, handle text, note text);
CREATE INDEX handles_handle ON handles (handle);
SELECT claims_cell.claim_column('handles', 'handle', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_MEMBERS',
                                "deferrable" => true, initially_deferred => false);
RESET ROLE;
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON handles TO PUBLIC;
CREATE TABLE keys (id bigint PRIMARY KEY, fp text, note text) PARTITION BY RANGE (id);
CREATE TABLE keys_lo PARTITION OF keys FOR VALUES FROM (MINVALUE) TO (11);
CREATE TABLE keys_hi PARTITION OF keys FOR VALUES FROM (11) TO (MAXVALUE);
CREATE INDEX keys_fp ON keys (fp);
});
	my ($st, $out, $err) = ('', '', '');
	($st, $out, $err) = sql_state($node, $db,
		q{SELECT claims_cell.claim_column('keys', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_KEYS')})
	  unless ($route // 'parent') eq 'partitions';
	$r{parent_state} = $st;
	$r{parent_error} = $err;
	if ($st eq '00000')
	{
		$r{partitioned} = 'parent';
	}
	else
	{
		$node->safe_psql($db, q{
SELECT claims_cell.claim_column('keys_lo', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_KEYS');
SELECT claims_cell.claim_column('keys_hi', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_GPG_KEYS');
});
		$r{partitioned} = 'partitions';
	}
	($st, $out, $err) = sql_state($node, $db, q{CREATE TABLE admins () INHERITS (users)});
	$r{inherit_state} = $st;
	$r{inherit_error} = $err;
	return \%r;
}

sub pick { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }

# The claimed tables a statement may touch: [table, claimed column, id range, pool].
my @TABLES = (
	[ 'users', 'username', 8, \@NAMES ],
	[ 'orgs', 'path', 8, \@NAMES ],
	[ 'handles', 'handle', 8, \@NAMES ],
	[ 'legacy', 'name', 6, \@LEGACY ],
	[ 'keys', 'fp', 20, \@KEYS ]);

sub lit { my ($v) = @_; return defined $v ? "'$v'" : 'NULL'; }

# One random data-changing statement (SQL text) on one of the tables (only
# handles for the delegated role); the COPY form carries its data.
sub random_statement
{
	my (%o) = @_;
	my $t = $o{as_app} ? $TABLES[2] : pick(@TABLES);
	my ($tab, $col, $ids, $pool) = @$t;
	my $id = 1 + int(rand($ids));
	my $v = pick(@$pool);
	my $note = 'n' . int(rand(1000));
	my $r = rand();
	return "INSERT INTO $tab (id, $col, note) VALUES ($id, '$v', '$note')" if $r < 0.22;
	if ($r < 0.27)
	{
		my $id2 = 1 + int(rand($ids));
		my $v2 = pick(@$pool);
		return "INSERT INTO $tab (id, $col) VALUES ($id, '$v'), ($id2, '$v2')";
	}
	return "INSERT INTO $tab (id, $col, note) VALUES ($id, '$v', '$note') "
	  . "ON CONFLICT (id) DO UPDATE SET $col = EXCLUDED.$col" if $r < 0.34;
	return "INSERT INTO $tab (id, $col) VALUES ($id, '$v') ON CONFLICT DO NOTHING" if $r < 0.37;
	return "UPDATE $tab SET $col = '$v' WHERE id = $id" if $r < 0.50;
	return "UPDATE $tab SET note = '$note' WHERE id = $id" if $r < 0.58;
	return "UPDATE $tab SET $col = NULL WHERE id = $id" if $r < 0.61;
	if ($r < 0.65)
	{
		# two rows swap their values in one statement
		my $id2 = 1 + int(rand($ids));
		return "UPDATE $tab t SET $col = s.$col FROM $tab s "
		  . "WHERE (t.id, s.id) IN (($id, $id2), ($id2, $id))";
	}
	if ($r < 0.68 && $tab eq 'keys')
	{
		# across the partitions: a row moves from keys_lo to keys_hi or back
		return "UPDATE keys SET id = CASE WHEN id <= 10 THEN id + 10 ELSE id - 10 END WHERE id = $id";
	}
	return "DELETE FROM $tab WHERE id = $id" if $r < 0.78;
	return "DELETE FROM $tab WHERE id > $ids - 2" if $r < 0.80;
	if ($r < 0.88)
	{
		my $action = pick("UPDATE SET $col = s.v", 'DELETE', 'DO NOTHING');
		return "MERGE INTO $tab t USING (VALUES (${id}::bigint, '$v')) s(id, v) ON t.id = s.id "
		  . "WHEN MATCHED THEN $action WHEN NOT MATCHED THEN INSERT (id, $col) VALUES (s.id, s.v)";
	}
	if ($r < 0.95 && !$o{no_copy})
	{
		my @rows = map { join("\t", 1 + int(rand($ids)), pick(@$pool), 'copied') } 1 .. 1 + int(rand(3));
		# psql stops reading its script at a lone ";" after the data and
		# keeps no SQLSTATE of a failed COPY, so a SELECT follows it: in the
		# transaction the COPY aborted, that fails (25P02); COPY is used only
		# inside transactions. A COPY refused before its data makes psql
		# read the data as SQL, which fails too.
		return "COPY $tab (id, $col, note) FROM STDIN;\n" . join("\n", @rows) . "\n\\.\nSELECT 'copied'";
	}
	return "TRUNCATE $tab" if $r < 0.965 && !$o{no_copy};
	return "SELECT pg_sleep(0.02)";
}

# A PL/pgSQL DO block of a few statements, some in blocks with exception handlers.
sub random_do_block
{
	my @body;
	for (1 .. 1 + int(rand(3)))
	{
		(my $s = random_statement(no_copy => 1)) =~ s/^SELECT /PERFORM /;
		if (chance(0.6))
		{
			my $handler = pick('unique_violation', 'unique_violation OR lock_not_available',
				'OTHERS', 'OTHERS OR query_canceled');
			push @body, "BEGIN $s; EXCEPTION WHEN $handler THEN RAISE NOTICE 'caught %', SQLSTATE; END;";
		}
		else
		{
			push @body, "$s;";
		}
	}
	return 'DO $fuzz$ BEGIN ' . join(' ', @body) . ' END $fuzz$';
}

# One random transaction: {kind, steps => [{sql, op}]} where op is one of
# stmt, begin, savepoint, rollback_to, release, commit, rollback, prepare,
# commit_prepared, rollback_prepared. gid names a prepared transaction.
sub random_transaction
{
	my ($gid) = @_;
	my $r = rand();
	my @steps;
	my $s = sub { push @steps, { op => $_[0], sql => $_[1] } };
	if ($r < 0.25)
	{
		$s->('stmt', random_statement(no_copy => 1));
		return { kind => 'autocommit', steps => \@steps };
	}
	if ($r < 0.32)
	{
		$s->('stmt', random_do_block());
		return { kind => 'do', steps => \@steps };
	}
	my $iso = pick('READ COMMITTED', 'REPEATABLE READ', 'SERIALIZABLE');
	my $prepare = chance(0.08);
	$s->('begin', "BEGIN ISOLATION LEVEL $iso");
	my $as_app = chance(0.12);
	$s->('stmt', "SET LOCAL statement_timeout = '" . (20 + int(rand(400))) . "ms'") if chance(0.08);
	$s->('stmt', "SET LOCAL claims_cell.finish_leases_in = 'worker'") if !$as_app && chance(0.2);
	# set_constraints is the superuser's: called before the role changes
	$s->('stmt', "SELECT claims_cell.set_constraints('" . pick('IMMEDIATE', 'DEFERRED') . "')") if chance(0.2);
	$s->('stmt', 'SET LOCAL ROLE app') if $as_app;
	if ($prepare && chance(0.5))
	{
		# only unclaimed columns change: the prepare may succeed
		my $t = $as_app ? $TABLES[2] : pick(@TABLES);
		$s->('stmt', "UPDATE $t->[0] SET note = 'p' WHERE id = " . (1 + int(rand($t->[2]))));
	}
	else
	{
		my $sp = 0;
		for (1 .. 1 + int(rand(4)))
		{
			if (chance(0.25))
			{
				my $name = 's' . ++$sp;
				$s->('savepoint', "SAVEPOINT $name");
				$s->('stmt', random_statement(as_app => $as_app)) for 1 .. 1 + int(rand(2));
				$s->(chance(0.5) ? ('rollback_to', "ROLLBACK TO SAVEPOINT $name") : ('release', "RELEASE SAVEPOINT $name"));
			}
			else
			{
				$s->('stmt', chance(0.1) && !$as_app ? random_do_block() : random_statement(as_app => $as_app));
			}
		}
	}
	if ($prepare)
	{
		$s->('prepare', "PREPARE TRANSACTION '$gid'");
		$s->(chance(0.75) ? ('commit_prepared', "COMMIT PREPARED '$gid'") : ('rollback_prepared', "ROLLBACK PREPARED '$gid'"));
		return { kind => 'prepared', steps => \@steps };
	}
	$s->(chance(0.85) ? ('commit', 'COMMIT') : ('rollback', 'ROLLBACK'));
	return { kind => lc($iso =~ s/ /_/gr), steps => \@steps };
}

# Finish the prepared transactions a client of this prefix left behind (its
# connection died between PREPARE and COMMIT PREPARED): commit them.
sub resolve_prepared
{
	my ($session, $prefix) = @_;
	my $r = $session->query("SELECT string_agg(gid, ' ') FROM pg_prepared_xacts WHERE gid LIKE '$prefix%'");
	return if $r->{lost} || $r->{sqlstate} ne '00000';
	$session->query("COMMIT PREPARED '$_'") for grep { /\S/ } split / /, $r->{out} // '';
	return;
}

# One client: runs random transactions on connstr until the deadline
# (seconds on the monotonic clock, or the stop file appears), reconnecting
# after its server went away. srand must be called before. Writes its
# figures as JSON to out_file: transactions by kind and outcome
# (committed, rolled_back, failed: a statement or the COMMIT failed,
# in_doubt: the connection died with the COMMIT sent), and SQLSTATEs.
sub run_client
{
	my (%o) = @_;
	my %fig = (transactions => 0, committed => 0, rolled_back => 0, failed => 0, in_doubt => 0,
		lost => 0, prepared => 0, prepare_refused => 0, reconnects => 0, states => {}, kinds => {});
	my $session = ClaimsFault::Session->new($o{connstr}, timeout => 150);
	my $now = sub { Time::HiRes::clock_gettime(Time::HiRes::CLOCK_MONOTONIC()) };
	my $n = 0;
	while ($now->() < $o{deadline} && !-e $o{stop_file})
	{
		# the next transaction is chosen before connecting, so that the
		# sequence is the seed's whatever the faults do
		my $tx = random_transaction("$o{gid_prefix}$n");
		$n++;
		if (!$session->{h})
		{
			until ($session->connect)
			{
				last if $now->() >= $o{deadline} || -e $o{stop_file};
				Time::HiRes::sleep(0.2);
			}
			last unless $session->{h};
			$fig{reconnects}++;
			resolve_prepared($session, $o{gid_prefix});
		}
		$fig{transactions}++;
		$fig{kinds}{ $tx->{kind} }++;
		my ($aborted, $open, $outcome) = (0, 0, undef);
		for my $step (@{ $tx->{steps} })
		{
			my $op = $step->{op};
			my $sql = $step->{sql};
			# a transaction that failed is rolled back, as an application would
			$sql = 'ROLLBACK' if $aborted && ($op eq 'commit' || $op eq 'prepare');
			next if $op =~ /_prepared$/ && ($outcome // '') ne 'prepared';
			my $res = $session->query($sql);
			if ($res->{lost})
			{
				$outcome = ($op eq 'commit' || $op eq 'commit_prepared') && !$aborted ? 'in_doubt' : 'lost';
				last;
			}
			my $st = $res->{sqlstate};
			$fig{states}{$st}++ if $st ne '00000';
			$open = 1 if $op eq 'begin' && $st eq '00000';
			# COMMIT, ROLLBACK and PREPARE end the transaction, failing or not
			$open = 0 if $op =~ /^(commit|rollback|prepare)$/;
			if ($op eq 'commit' || ($op eq 'stmt' && $tx->{kind} =~ /^(autocommit|do)$/))
			{
				$outcome = $aborted ? 'failed' : $st eq '00000' ? 'committed' : 'failed';
				last;
			}
			if ($op eq 'rollback')
			{
				$outcome = $aborted ? 'failed' : 'rolled_back';
				last;
			}
			if ($op eq 'prepare')
			{
				if ($aborted) { $outcome = 'failed'; last; }
				if ($st eq '00000') { $outcome = 'prepared'; $fig{prepared}++; next; }
				$fig{prepare_refused}++ if $st eq '0A000';
				$outcome = 'failed';
				last;
			}
			if ($op =~ /^(commit|rollback)_prepared$/)
			{
				$outcome = $st ne '00000' ? 'failed' : $op eq 'commit_prepared' ? 'committed' : 'rolled_back';
				last;
			}
			if ($op eq 'rollback_to') { $aborted = 0 if $st eq '00000'; next; }
			$aborted = 1 if $st ne '00000';
		}
		$outcome //= 'failed';
		$fig{$outcome}++;
		if ($outcome eq 'lost' || $outcome eq 'in_doubt')
		{
			$session->close;
		}
		elsif ($open)
		{
			# whatever failed, leave no transaction open
			$session->query('ROLLBACK');
		}
	}
	if ($session->{h})
	{
		$session->query('ROLLBACK');
		resolve_prepared($session, $o{gid_prefix});
		$session->close;
	}
	open my $fh, '>', $o{out_file} or die "$o{out_file}: $!";
	print $fh JSON::PP->new->canonical->encode(\%fig);
	close $fh;
	return;
}

# Retire the legacy table's claimed column one of the ways after which the
# docs say its values stay claimed at the store: unclaim_column, set_claiming
# false (paused), DROP COLUMN, DROP TABLE. Returns the SQLSTATE.
sub retire_legacy
{
	my ($node, $db, $how) = @_;
	my %sql = (
		unclaim => q{SELECT claims_cell.unclaim_column('legacy', 'name')},
		pause => q{SELECT claims_cell.set_claiming('legacy', 'name', false)},
		drop_column => q{ALTER TABLE legacy DROP COLUMN name},
		drop_table => q{DROP TABLE legacy});
	my ($st) = sql_state($node, $db, "SET lock_timeout = '5s';\n$sql{$how}");
	return $st;
}

# Reconcile a cell until nothing is pending and no local lease row is left
# (stale_after = 0: nothing runs any more); true when it got there within
# the TAP timeout. The store may still be recovering or the breaker
# cooling down: a pass that fails is tried again.
sub settle_cell
{
	my ($node, $db) = @_;
	my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
	my $last = '';
	while (time() < $give_up)
	{
		my ($rc, $out, $err) = $node->psql($db, q{
SET claims_cell.stale_after = 0; SET claims_cell.cleanup_after = 0; SET claims_cell.orphan_after = 0;
SELECT pending FROM claims_cell.reconcile(full_scan => true);
SELECT count(*) FROM claims_cell.outstanding_leases});
		$last = $rc == 0 ? $out : $err;
		return (1, $last) if $rc == 0 && $out =~ /^0\n0$/;
		Time::HiRes::sleep(0.3);
	}
	return (0, $last);
}

# verify(repair => true) of every claimed table of a cell that is not
# paused and has no claimed ancestor; returns "table: missing/extra/drifted/
# repaired/skipped" lines and the errors.
sub verify_cell
{
	my ($node, $db) = @_;
	my @lines;
	my $tables = $node->safe_psql($db, q{
SELECT DISTINCT table_name::text FROM claims_cell.claimed_columns c
 WHERE enabled AND NOT EXISTS (SELECT 1 FROM pg_partition_ancestors(c.table_name) a
                                JOIN claims_cell.claimed_attributes p ON p.table_name = a.relid
                               WHERE a.relid <> c.table_name)
 ORDER BY 1});
	for my $t (grep { $_ ne '' } split /\n/, $tables)
	{
		my ($rc, $out, $err) = $node->psql($db,
			"SET claims_cell.verify_recent = 0; SELECT concat_ws('/', missing, extra, drifted, repaired, skipped_recent) FROM claims_cell.verify('$t', repair => true)");
		push @lines, $rc == 0 ? "$t: $out" : "$t: error $err";
	}
	return @lines;
}

# The rows of a cell holding claimable values: [table, column, bucket type,
# enabled, source type, id, value, subject, source id in hex].
sub cell_rows
{
	my ($node, $db) = @_;
	my $cols = $node->safe_psql($db, q{
SELECT table_name::text, column_name, bucket_type, enabled, source_type, subject_column, source_column
  FROM claims_cell.claimed_columns c
 WHERE NOT EXISTS (SELECT 1 FROM pg_partition_ancestors(c.table_name) a
                    JOIN claims_cell.claimed_attributes p ON p.table_name = a.relid
                   WHERE a.relid <> c.table_name)
 ORDER BY 1, 2});
	my (@rows, @decl);
	for my $line (grep { $_ ne '' } split /\n/, $cols)
	{
		my ($t, $c, $bt, $en, $src, $subj, $key) = split /\|/, $line;
		push @decl, [ $t, $c, $bt, $en, $src ];
		my $out = $node->safe_psql($db, qq{
SELECT $key, $c, $subj, lpad(to_hex($key), 16, '0') FROM $t
 WHERE $c IS NOT NULL AND btrim(${c}::text) <> '' ORDER BY 1});
		push @rows, map { [ $t, $c, $bt, $en eq 't', $src, split(/\|/, $_) ] } grep { $_ ne '' } split /\n/, $out;
	}
	return (\@rows, \@decl);
}

# Check the invariants over the cells ([cell id, node, db], ...) and the
# store. Returns (violations, exceptions): lines naming the value, the cells,
# the rows and the store's rows.
#  1. every row of a claimed (not paused) column holds a value the store
#     gives its cell as a record (ACTIVE), for that row's subject and source;
#  2. no value is owned by two cells, nor held by rows of two cells;
#  3. nothing the store gives a cell is held by no row of it, except the
#     values of columns the docs say leave their values claimed (unclaimed,
#     dropped, paused): named as exceptions;
#  4. nothing is leased at the store, no lease is outstanding, no lease row
#     is left in a cell;
#  5. no value is held by two rows of one cell (one claim, one row).
sub check_invariants
{
	my ($store, @cells) = @_;
	my (@bad, @excepted);
	my %store;    # "bt\tvalue" => [records]
	my $out = $store->safe_psql('postgres', q{
SELECT t.name, c.bucket_value, c.creator_id, c.status, c.subject_id, s.name, encode(c.source_id, 'hex'),
       coalesce(c.lease_uuid::text, '-')
  FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
  JOIN claim_source_types s ON s.type_id = c.source_type ORDER BY 1, 2});
	for (grep { $_ ne '' } split /\n/, $out)
	{
		my @f = split /\|/;
		push @{ $store{"$f[0]\t$f[1]"} }, { bt => $f[0], value => $f[1], cell => $f[2], status => $f[3],
			subject => $f[4], source => $f[5], source_id => $f[6], lease => $f[7], text => $_ };
	}
	my $srows = sub { join('; ', map { "store: $_->{text}" } @{ $store{ $_[0] } // [] }) || 'store: no record' };

	my %held;    # "bt\tvalue" => cell => [rows]
	my %retired; # cell => source type => how
	for my $c (@cells)
	{
		my ($id, $node, $db) = @$c;
		my ($rows, $decl) = cell_rows($node, $db);
		for my $r (@$rows)
		{
			my ($t, $col, $bt, $en, $src, $key, $v, $subj, $hex) = @$r;
			push @{ $held{"$bt\t$v"}{$id} }, { cell => $id, table => $t, en => $en,
				text => "cell $id: $t($key).$col = $v" . ($en ? '' : ' (paused)'), key => $key,
				subject => $subj, source => $src, hex => $hex };
		}
		# source types that stay claimed without a row: paused columns, and
		# legacy's once its column is no longer declared
		$retired{$id}{ $_->[4] } = "column $_->[0].$_->[1] paused" for grep { $_->[3] ne 't' } @$decl;
		$retired{$id}{RAILS_TABLE_SNIPPETS} //= 'column legacy.name unclaimed or dropped'
		  unless grep { $_->[0] eq 'legacy' && $_->[1] eq 'name' } @$decl;
		my $left = $node->safe_psql($db, 'SELECT count(*) FROM claims_cell.outstanding_leases');
		push @bad, "(4) cell $id: $left local lease rows left" if $left ne '0';
	}

	for my $k (sort keys %held)
	{
		my ($bt, $v) = split /\t/, $k;
		my @active = map { grep { $_->{en} } @{ $held{$k}{$_} } } sort keys %{ $held{$k} };
		my %cells_active = map { $_->{cell} => 1 } @active;
		my $rows = join('; ', map { $_->{text} } map { @{ $held{$k}{$_} } } sort keys %{ $held{$k} });
		push @bad, "(2) $bt=$v is held by rows of cells " . join(',', sort keys %cells_active) . ": $rows; " . $srows->($k)
		  if keys %cells_active > 1;
		for my $cell (sort keys %cells_active)
		{
			my @mine = grep { $_->{cell} == $cell } @active;
			push @bad, "(5) $bt=$v is held by " . scalar(@mine) . " rows of cell $cell: $rows; " . $srows->($k)
			  if @mine > 1;
			my $rec = (grep { $_->{cell} == $cell } @{ $store{$k} // [] })[0];
			if (!$rec)
			{
				push @bad, "(1) $bt=$v of cell $cell is not owned by it at the store: $rows; " . $srows->($k);
			}
			elsif ($rec->{status} ne 'ACTIVE')
			{
				push @bad, "(1) $bt=$v of cell $cell is only leased at the store: $rows; " . $srows->($k);
			}
			elsif (@mine == 1 && ($rec->{subject} ne $mine[0]{subject} || $rec->{source} ne $mine[0]{source}
					|| $rec->{source_id} ne $mine[0]{hex}))
			{
				push @bad, "(1) $bt=$v of cell $cell is owned for another row: $rows; " . $srows->($k);
			}
		}
	}
	for my $k (sort keys %store)
	{
		my ($bt, $v) = split /\t/, $k;
		my @recs = @{ $store{$k} };
		push @bad, "(2) $bt=$v is owned by several records: " . $srows->($k) if @recs > 1;
		for my $rec (@recs)
		{
			push @bad, "(4) $bt=$v is leased at the store: $rec->{text}" if $rec->{status} ne 'ACTIVE';
			next if $held{$k}{ $rec->{cell} };
			my $why = $retired{ $rec->{cell} }{ $rec->{source} };
			my $line = "(3) $bt=$v is owned by cell $rec->{cell} but no row of it holds it; " . $srows->($k)
			  . (keys %{ $held{$k} // {} } ? '; rows: ' . join('; ', map { $_->{text} } map { @$_ } values %{ $held{$k} }) : '');
			if ($why) { push @excepted, "$line (excepted: $why)"; }
			else { push @bad, $line; }
		}
	}
	my $leases = $store->safe_psql('postgres', q{
SELECT coalesce(string_agg(uuid || ' of cell ' || creator_id || ' created ' || created_at, '; '), '')
  FROM claim_leases WHERE state = 'outstanding'});
	push @bad, "(4) leases outstanding at the store: $leases" if $leases ne '';
	return (\@bad, \@excepted);
}

1;
