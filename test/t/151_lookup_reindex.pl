
# claims_get_record while its key index is rebuilt.
#
# The routing lookup reads the unique index claims_bucket_key directly. An
# operator may rebuild that index at any time: REINDEX [CONCURRENTLY], or
# by hand (rename the old index, CREATE UNIQUE INDEX CONCURRENTLY under the
# old name, drop the old one), or drop and re-create the constraint. Each
# gives the index a new oid, and for a while the index of that name may be
# one that is not ready or not valid. Lookups must go on answering the
# right record throughout, without an error:
#
#  1. a lookup that waits while the constraint is dropped and re-created in
#     one transaction, and the lookups after it;
#  2. lookups while CREATE UNIQUE INDEX CONCURRENTLY builds the new
#     claims_bucket_key (not ready yet: a writer's open transaction holds
#     the build up), after that build was cancelled (an invalid index of
#     that name is left), and after the rebuild was finished and the
#     constraint moved to the new index;
#  3. for a bounded time, two cells create values and look them up at once,
#     and look up values created before, in a loop of short transactions,
#     while REINDEX INDEX CONCURRENTLY claims_bucket_key and REINDEX TABLE
#     CONCURRENTLY claims run again and again.
#
# At the end claims_check() must be empty and amcheck must pass.
#
# Environment: CLAIMS_REINDEX_SECONDS (part 3, default 20).
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

my $seconds = env_num('CLAIMS_REINDEX_SECONDS', 20);

my $node = new_claims_node('lookup_reindex');
my $dir = "${PostgreSQL::Test::Utils::tmp_check}/lookup_reindex";
make_path($dir);

# A routing role, and a role for each of cells 21 and 22.
$node->safe_psql('postgres', <<'EOS');
CREATE ROLE reindex_router LOGIN IN ROLE claims_router;
CREATE ROLE reindex_cell_a LOGIN;
CREATE ROLE reindex_cell_b LOGIN;
SET client_min_messages = warning;
SELECT claims_register_cell(21, 'cell-21', 'reindex_cell_a');
SELECT claims_register_cell(22, 'cell-22', 'reindex_cell_b');
EOS

# Known values: 100 usernames of each cell, committed.
my %known;    # value => "cell uuid"
for my $cell (21, 22)
{
	my $req = enc({ cell_id => $cell,
		create_records => [ map { metadata('USERNAMES', "known-$cell-$_", $_, $_) } 1 .. 100 ] });
	$node->safe_psql('postgres',
		'SELECT claims_begin_update(' . sql_quote($req) . "::jsonb)->>'lease_uuid' AS l \\gset\n"
		  . "SELECT claims_commit($cell, :'l');");
}
for my $line (split /\n/, $node->safe_psql('postgres',
		q{SELECT bucket_value, creator_id || ' ' || uuid FROM claims WHERE bucket_value LIKE 'known-%'}))
{
	my ($v, $want) = split /\|/, $line;
	$known{$v} = $want;
}
is(scalar(keys %known), 200, '200 known values are claimed');
my @sample = map { ("known-21-$_", "known-22-$_") } (1, 37, 100);

# One lookup as the router sees it: "cell status uuid", or "unclaimed".
sub lookup_sql
{
	my ($value) = @_;
	my $req = sql_quote(enc({ bucket => { type => 'USERNAMES', value => $value } }));
	return "SELECT coalesce((SELECT (r->'record'->>'cell_id') || ' ' || (r->'record'->>'status') || ' ' || "
	  . "(r->'record'->>'uuid') FROM (SELECT claims_get_record(${req}::jsonb) AS r OFFSET 0) s), 'unclaimed')";
}

# The router looks up the sample values; returns the problems.
sub check_sample
{
	my ($session) = @_;
	my @problems;
	for my $v (@sample)
	{
		my ($cell, $uuid) = split / /, $known{$v};
		my $r = $session->query(lookup_sql($v));
		if ($r->{lost}) { push @problems, "$v: connection lost: $r->{err}"; next; }
		if ($r->{sqlstate} ne '00000') { push @problems, "$v: $r->{sqlstate} $r->{err}"; next; }
		push @problems, "$v: answered '$r->{out}', expected '$cell ACTIVE $uuid'"
		  unless $r->{out} eq "$cell ACTIVE $uuid";
	}
	return @problems;
}

my $router = ClaimsFault::Session->new(as_role($node, 'reindex_router'));
$router->connect or die 'the router cannot connect';
my $router_pid = $router->query('SELECT pg_backend_pid()')->{out};
my $ddl = ClaimsFault::Session->new($node->connstr('postgres'));
$ddl->connect or die 'cannot connect';
my @p = check_sample($router);
is(join("\n", @p), '', 'the router finds every sample value (its lookup target is cached now)');

sub ddl_ok
{
	my ($sql, $what) = @_;
	my $r = $ddl->query($sql);
	die "$what failed: " . ($r->{err} // 'lost') if $r->{lost} || $r->{sqlstate} ne '00000';
	return $r->{out};
}

# Wait until a backend waits for a lock.
sub wait_for_lock_wait
{
	my ($pid) = @_;
	return $node->poll_query_until('postgres',
		"SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $pid");
}

# ---------------------------------------------------------------------------
# 1. A lookup waits while the constraint is dropped and re-created.
ddl_ok('BEGIN', 'begin');
ddl_ok('ALTER TABLE claims DROP CONSTRAINT claims_bucket_key', 'drop constraint');
ddl_ok('ALTER TABLE claims ADD CONSTRAINT claims_bucket_key UNIQUE (bucket_type, bucket_digest)',
	'add constraint');
my ($v0) = @sample;
my ($cell0, $uuid0) = split / /, $known{$v0};
$router->send(lookup_sql($v0));
ok(wait_for_lock_wait($router_pid), 'the lookup waits for the transaction that re-creates the index');
ddl_ok('COMMIT', 'commit');
my $r = $router->result;
is($r->{lost} ? 'lost' : "$r->{sqlstate} $r->{out}", "00000 $cell0 ACTIVE $uuid0",
	'the lookup that waited answers the right record')
  or diag($r->{err});
$router->connect;    # (again, if the lookup lost its connection)
@p = check_sample($router);
is(join("\n", @p), '', 'every later lookup answers the right record');

# ---------------------------------------------------------------------------
# 2. Rebuilt by hand: the old index renamed, a new claims_bucket_key built
# concurrently. A writer's open transaction holds the build up after the
# new index exists, before it is ready.
my $writer = ClaimsFault::Session->new(as_role($node, 'reindex_cell_a'));
$writer->connect or die 'the cell cannot connect';
my $builder = ClaimsFault::Session->new($node->connstr('postgres'));
$builder->connect or die 'cannot connect';
my $builder_pid = $builder->query('SELECT pg_backend_pid()')->{out};

sub hold_writer
{
	my $w1 = $writer->query('BEGIN');
	my $w2 = $writer->query('SELECT claims_begin_update('
		  . sql_quote(enc({ cell_id => 21, create_records => [ metadata('USERNAMES', 'held-' . time(), 1, 1) ] }))
		  . "::jsonb) IS NOT NULL");
	die 'the writer could not begin: ' . ($w2->{err} // 'lost') if $w2->{lost} || $w2->{sqlstate} ne '00000';
	return;
}

sub index_state
{
	return $node->safe_psql('postgres', q{
SELECT string_agg(c.relname || ':' || CASE WHEN i.indisvalid THEN 'valid' WHEN i.indisready THEN 'ready' ELSE 'building' END, ' ' ORDER BY c.relname)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid = 'claims'::regclass AND c.relname LIKE 'claims_bucket_key%'});
}

hold_writer();
ddl_ok('ALTER INDEX claims_bucket_key RENAME TO claims_bucket_key_old', 'rename');
$builder->send('CREATE UNIQUE INDEX CONCURRENTLY claims_bucket_key ON claims (bucket_type, bucket_digest)');
ok($node->poll_query_until('postgres', q{
SELECT EXISTS (SELECT FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
               WHERE c.relname = 'claims_bucket_key' AND NOT i.indisready)
   AND (SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = } . $builder_pid . ')'),
	'the new claims_bucket_key exists, not ready, its build waiting for the writer');
diag('indexes: ' . index_state());
$router->connect;
@p = check_sample($router);
is(join("\n", @p), '', 'lookups answer the right records while the new index is being built');

# The build is cancelled: an invalid index named claims_bucket_key stays.
$node->safe_psql('postgres', "SELECT pg_cancel_backend($builder_pid)");
my $b = $builder->result;
is($b->{sqlstate} // 'lost', '57014', 'the build was cancelled');
like(index_state(), qr/^claims_bucket_key:building claims_bucket_key_old:valid$/,
	'an unfinished claims_bucket_key is left next to the old index');
$router->connect;
@p = check_sample($router);
is(join("\n", @p), '', 'lookups answer the right records while claims_bucket_key is an invalid index');

$writer->query('ROLLBACK');
ddl_ok('DROP INDEX claims_bucket_key', 'drop the invalid index');
ddl_ok('ALTER INDEX claims_bucket_key_old RENAME TO claims_bucket_key', 'rename back');
$router->connect;
@p = check_sample($router);
is(join("\n", @p), '', 'lookups answer the right records once the old index has its name again');

# The whole rebuild, finished: the constraint moves to the new index.
ddl_ok('ALTER INDEX claims_bucket_key RENAME TO claims_bucket_key_old', 'rename');
ddl_ok('CREATE UNIQUE INDEX CONCURRENTLY claims_bucket_key ON claims (bucket_type, bucket_digest)', 'build');
ddl_ok('BEGIN', 'begin');
ddl_ok('ALTER TABLE claims DROP CONSTRAINT claims_bucket_key_old', 'drop the old constraint');
ddl_ok('ALTER TABLE claims ADD CONSTRAINT claims_bucket_key UNIQUE USING INDEX claims_bucket_key',
	'the constraint on the new index');
ddl_ok('COMMIT', 'commit');
is(index_state(), 'claims_bucket_key:valid', 'claims_bucket_key is the rebuilt index');
$router->connect;
@p = check_sample($router);
is(join("\n", @p), '', 'lookups answer the right records after the rebuild');
my $conflict = $writer->query('SELECT claims_begin_update('
	  . sql_quote(enc({ cell_id => 21, create_records => [ metadata('USERNAMES', 'known-22-5', 1, 1) ] }))
	  . '::jsonb)');
is($conflict->{sqlstate} // 'lost', '23505', 'the rebuilt index still keeps values unique');
$writer->close;
$builder->close;

# ---------------------------------------------------------------------------
# 3. Lookups of fresh and known values in a loop of short transactions
# while the index and the table are reindexed concurrently, again and again.
$node->safe_psql('postgres', <<'EOS');
CREATE TABLE reindex_known (value text PRIMARY KEY, want text NOT NULL);
CREATE TABLE reindex_failures (at timestamptz NOT NULL DEFAULT clock_timestamp(),
                               cell bigint, what text, detail text);
CREATE TABLE reindex_runs (cell bigint, lookups bigint, creates bigint);
GRANT SELECT ON reindex_known TO reindex_cell_a, reindex_cell_b;
GRANT INSERT ON reindex_failures, reindex_runs TO reindex_cell_a, reindex_cell_b;

-- A cell creates a value and looks it up at once, then looks up a known
-- value, each in its own transaction; anything but the right record is
-- written down.
CREATE PROCEDURE reindex_lookups(cell bigint, secs float8) LANGUAGE plpgsql AS $$
DECLARE
  until_t timestamptz := clock_timestamp() + make_interval(secs => secs);
  n bigint := 0;
  lookups bigint := 0;
  creates bigint := 0;
  nknown int := (SELECT count(*) FROM reindex_known);
  v text;
  want text;
  got text;
  l jsonb;
  st text;
  msg text;
BEGIN
  WHILE clock_timestamp() < until_t LOOP
    n := n + 1;
    v := 'fresh-' || cell || '-' || n;
    want := NULL;
    BEGIN
      l := claims_begin_update(jsonb_build_object('cell_id', cell, 'create_records', jsonb_build_array(
        jsonb_build_object('bucket', jsonb_build_object('type', 'USERNAMES', 'value', v),
                           'subject', jsonb_build_object('type', 'USER', 'id', n),
                           'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', n)))));
      PERFORM claims_commit(cell, (l->>'lease_uuid')::uuid);
      want := cell || ' ACTIVE';
      creates := creates + 1;
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
      INSERT INTO reindex_failures (cell, what, detail) VALUES (cell, 'create ' || v, st || ' ' || msg);
    END;
    COMMIT;
    IF want IS NOT NULL THEN
      BEGIN
        got := coalesce((SELECT (r->'record'->>'cell_id') || ' ' || (r->'record'->>'status')
                         FROM (SELECT claims_get_record(jsonb_build_object('bucket',
                                 jsonb_build_object('type', 'USERNAMES', 'value', v))) AS r OFFSET 0) s), 'unclaimed');
      EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
        got := st || ' ' || msg;
      END;
      lookups := lookups + 1;
      IF got IS DISTINCT FROM want THEN
        INSERT INTO reindex_failures (cell, what, detail) VALUES (cell, 'lookup ' || v, got || ', expected ' || want);
      END IF;
      COMMIT;
    END IF;
    SELECT k.value, k.want INTO v, want FROM reindex_known k ORDER BY k.value OFFSET (n % nknown) LIMIT 1;
    BEGIN
      got := coalesce((SELECT (r->'record'->>'cell_id') || ' ' || (r->'record'->>'uuid')
                       FROM (SELECT claims_get_record(jsonb_build_object('bucket',
                               jsonb_build_object('type', 'USERNAMES', 'value', v))) AS r OFFSET 0) s), 'unclaimed');
    EXCEPTION WHEN OTHERS THEN
      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
      got := st || ' ' || msg;
    END;
    lookups := lookups + 1;
    IF got IS DISTINCT FROM want THEN
      INSERT INTO reindex_failures (cell, what, detail) VALUES (cell, 'lookup ' || v, got || ', expected ' || want);
    END IF;
    COMMIT;
  END LOOP;
  INSERT INTO reindex_runs VALUES (cell, lookups, creates);
END $$;
GRANT EXECUTE ON PROCEDURE reindex_lookups TO reindex_cell_a, reindex_cell_b;
EOS
$node->safe_psql('postgres',
	'INSERT INTO reindex_known VALUES '
	  . join(', ', map { '(' . sql_quote($_) . ', ' . sql_quote($known{$_}) . ')' } sort keys %known));

my $offset = log_offset($node);
my $t0 = time();
my $deadline = $t0 + $seconds;

sub reindexer_main
{
	my $s = ClaimsFault::Session->new($node->connstr('postgres'), timeout => 300);
	$s->connect or die 'cannot connect';
	my %sum = (index => 0, table => 0, errors => '');
	while (time() < $deadline)
	{
		for my $what ('index', 'table')
		{
			my $r = $s->query($what eq 'index'
				? 'REINDEX INDEX CONCURRENTLY claims_bucket_key'
				: 'REINDEX TABLE CONCURRENTLY claims');
			if ($r->{lost}) { $sum{errors} .= "lost "; $s->close; $s->connect or last; next; }
			if ($r->{sqlstate} eq '00000') { $sum{$what}++; }
			else { $sum{errors} .= "$r->{sqlstate} "; }
		}
	}
	$s->close;
	write_summary("$dir/reindexer", %sum);
	return;
}

sub looker_main
{
	my ($arg) = @_;
	my ($cell, $role) = @$arg;
	my $s = ClaimsFault::Session->new(as_role($node, $role), timeout => $seconds + 300);
	$s->connect or die 'cannot connect';
	my $secs = sprintf('%.3f', $deadline - time());
	my $r = $s->query("CALL reindex_lookups($cell, $secs)");
	write_summary("$dir/looker$cell", sqlstate => $r->{lost} ? 'lost' : $r->{sqlstate},
		err => ($r->{err} // '') =~ s/\n/ /gr);
	$s->close;
	return;
}

my @pids = (run_children(\&reindexer_main, 1),
	run_children(\&looker_main, [ 21, 'reindex_cell_a' ], [ 22, 'reindex_cell_b' ]));
my $failed_children = 0;
for my $pid (@pids)
{
	waitpid($pid, 0);
	$failed_children++ if $? != 0;
}
is($failed_children, 0, 'the reindexer and both cells ran to the end');
$node->poll_query_until('postgres', 'SELECT true') or die 'the server does not answer any more';

my %reindexer = read_summary("$dir/reindexer");
diag("in $seconds s: REINDEX INDEX CONCURRENTLY x" . ($reindexer{index} // '?')
	  . ', REINDEX TABLE CONCURRENTLY x' . ($reindexer{table} // '?')
	  . (($reindexer{errors} // '') ne '' ? ", reindex errors: $reindexer{errors}" : ''));
cmp_ok(($reindexer{index} // 0) + ($reindexer{table} // 0), '>', 0, 'the index was rebuilt concurrently');
for my $cell (21, 22)
{
	my %l = read_summary("$dir/looker$cell");
	is($l{sqlstate} // 'none', '00000', "the loop of cell $cell ran to its end") or diag($l{err});
}
my $runs = $node->safe_psql('postgres', 'SELECT cell, lookups, creates FROM reindex_runs ORDER BY cell');
diag("cell|lookups|creates:\n$runs");
like($runs, qr/^21\|[1-9]\d*\|[1-9]\d*\n22\|[1-9]\d*\|[1-9]\d*$/, 'both cells created and looked up values');
my $failures = $node->safe_psql('postgres',
	q{SELECT count(*) || ' failures; first: ' || coalesce(string_agg(cell || ' ' || what || ': ' || detail, '; ' ORDER BY at) FILTER (WHERE rn <= 5), '')
	  FROM (SELECT *, row_number() OVER (ORDER BY at) AS rn FROM reindex_failures) f});
is($failures, '0 failures; first: ', 'every create succeeded and every lookup answered the right record');

my @evidence = restart_evidence($node, $offset);
is(scalar(@evidence), 0, 'no server process crashed')
  or diag(join("\n", @evidence[ 0 .. ($#evidence < 10 ? $#evidence : 10) ]));
$router->connect;
@p = check_sample($router);
is(join("\n", @p), '', 'the router still finds every sample value');
$router->close;
$ddl->close;
like(index_state(), qr/^claims_bucket_key:valid$/, 'one valid claims_bucket_key is left');
is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty');
is(join("\n", amcheck_failures($node)), '', 'amcheck passes on every index');

done_testing();
