# The routing lookup reads the claims_bucket_key index directly. It must
# find the index again after REINDEX CONCURRENTLY gives the name to a new
# index (in a connection that has cached the old one, and while the
# REINDEX runs), and it must never read an index that is not valid: then
# it reads through a planned statement instead, with the same answers.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/../perl";
use ClaimsFault;

my $node = new_claims_node('reindex');
my $connstr = $node->connstr('postgres');
my $nvalues = 50;

# One committed lease of cell 1 holding user1 .. user50.
$node->safe_psql('postgres', qq{
SELECT claims_commit(1, (claims_begin_update(jsonb_build_object('cell_id', 1,
  'create_records', (SELECT jsonb_agg(jsonb_build_object(
      'bucket', jsonb_build_object('type', 'USERNAMES', 'value', 'user' || i),
      'subject', jsonb_build_object('type', 'USER', 'id', i),
      'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', i)))
    FROM generate_series(1, $nvalues) AS i)))->>'lease_uuid')::uuid);
});

# SQL answering "cell status subject" of one username.
sub lookup_sql
{
	my ($i) = @_;
	return "SELECT r->>'cell_id' || ' ' || (r->>'status') || ' ' || (r->'metadata'->'subject'->>'id') "
	  . "FROM (SELECT claims_get_record('{\"claim\": {\"username\": \"user$i\"}}')->'record' AS r) s";
}

# Look up every value through one connection; the number of wrong answers.
sub wrong_answers
{
	my ($session, $what) = @_;
	my $wrong = 0;
	for my $i (1 .. $nvalues)
	{
		my $r = $session->query(lookup_sql($i));
		next if !$r->{lost} && $r->{sqlstate} eq '00000' && $r->{out} eq "1 ACTIVE $i";
		diag("$what: user$i: " . ($r->{lost} ? 'connection lost' : "$r->{sqlstate} $r->{out} $r->{err}"));
		$wrong++;
	}
	return $wrong;
}

my $client = ClaimsFault::Session->new($connstr, timeout => 60);
ok($client->connect, 'client connected');
is(wrong_answers($client, 'before'), 0, 'every value found before any reindex');

# 1. The index is rebuilt under a connection that cached the old one.
my $old = $node->safe_psql('postgres', q{SELECT 'claims_bucket_key'::regclass::oid});
$node->safe_psql('postgres', 'REINDEX INDEX CONCURRENTLY claims_bucket_key');
my $new = $node->safe_psql('postgres', q{SELECT 'claims_bucket_key'::regclass::oid});
isnt($new, $old, 'REINDEX CONCURRENTLY gave the name to a new index');
is(wrong_answers($client, 'after reindex'), 0, 'every value found through the new index');

# 2. Lookups while REINDEX CONCURRENTLY runs again and again.
my $rounds = env_int('CLAIMS_REINDEX_ROUNDS', 15);
my $reindexer = ClaimsFault::Session->new($connstr, timeout => 120);
ok($reindexer->connect, 'reindexer connected');
my $wrong = 0;
my $failed_reindex = 0;
for my $round (1 .. $rounds)
{
	# send the REINDEX without waiting, look up meanwhile, then collect it
	my $sql = $round % 2 ? 'REINDEX INDEX CONCURRENTLY claims_bucket_key'
	  : 'REINDEX TABLE CONCURRENTLY claims';
	$reindexer->{in} .= "$sql;\n\\echo __reindex_$round :SQLSTATE\n";
	$wrong += wrong_answers($client, "during reindex $round");
	while ($reindexer->{out} !~ /__reindex_$round (\w+)\n/)
	{
		last unless $reindexer->{h}->pumpable;
		$reindexer->{h}->pump;
	}
	$failed_reindex++ unless $reindexer->{out} =~ /__reindex_$round 00000\n/;
	$reindexer->{out} = '';
}
is($failed_reindex, 0, "$rounds concurrent reindexes done");
is($wrong, 0, 'every lookup during the reindexes found its value');

# 3. An index that is not valid is never read: the answers come through the
# planner (which skips it), and the index's scan count does not move.
sub index_scans
{
	$node->safe_psql('postgres', 'SELECT pg_stat_force_next_flush()');
	return $node->safe_psql('postgres',
		q{SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = 'claims_bucket_key'});
}
$client->query('SELECT pg_stat_force_next_flush()');
my $scans_before = index_scans();
is(wrong_answers($client, 'valid index'), 0, 'lookups with a valid index');
$client->query('SELECT pg_stat_force_next_flush()');
my $scans_valid = index_scans();
cmp_ok($scans_valid, '>=', $scans_before + $nvalues, 'a valid index is read directly');

$node->safe_psql('postgres', q{
UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'claims_bucket_key'::regclass;
});
is(wrong_answers($client, 'invalid index'), 0, 'lookups with the index marked invalid');
$client->query('SELECT pg_stat_force_next_flush()');
is(index_scans(), $scans_valid, 'an invalid index is not read');
is($client->query(lookup_sql('_nobody'))->{out}, '', 'an unclaimed value is still not found');

$node->safe_psql('postgres', q{
UPDATE pg_index SET indisvalid = true WHERE indexrelid = 'claims_bucket_key'::regclass;
});
is(wrong_answers($client, 'valid again'), 0, 'lookups once the index is valid again');
$client->query('SELECT pg_stat_force_next_flush()');
cmp_ok(index_scans(), '>=', $scans_valid + $nvalues, 'the index is read directly again');

$client->close;
$reindexer->close;
is(scalar(crash_lines_in_log($node)), 0, 'no crash in the server log');
$node->stop;
done_testing();
