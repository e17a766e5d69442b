# claims_cell.verify(): drift between a cell's claimed tables and its claims
# at the store, found exactly and repaired: rows written with
# session_replication_role = replica (triggers off), claims an administrator
# removed at the store, subjects changed behind the triggers, claims past
# the table's last row, integer (negative ones too), uuid and text keys, a
# column claimed after it held 10,000 rows (the backfill). A second verify
# finds nothing. Recency on either side, a value another cell owns, a
# repair rolled back with its savepoint, a crash in the middle of a repair
# settled by reconcile(), and the background worker's scheduled,
# resumable verifications.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(sleep);
use IPC::Run ();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cell', qq{
claims_cell.verify_interval = 0
max_prepared_transactions = 2
});
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('users', 'email', 'EMAILS', 'USER', 'id');
CREATE TABLE projects (id integer PRIMARY KEY, path text, owner_id bigint,
                       updated_at timestamptz NOT NULL DEFAULT now());
SELECT claims_cell.claim_column('projects', 'path', 'ROUTES', 'USER', 'owner_id');
CREATE TABLE gpg_keys (id uuid PRIMARY KEY, fingerprint text, user_id bigint);
SELECT claims_cell.claim_column('gpg_keys', 'fingerprint', 'GPG_KEY_FINGERPRINTS', 'USER', 'user_id');
CREATE TABLE ssh_keys (fingerprint text PRIMARY KEY, user_id bigint);
SELECT claims_cell.claim_column('ssh_keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'user_id', 'RAILS_TABLE_KEYS');
});
add_cell(node => $node, store => $store, db => 'cell2', role => 'cell_two', cell_id => 2,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# verify(table, repair) in cell1 with verify_recent = 0 unless given;
# returns "missing|extra|drifted|repaired|skipped_recent".
sub verify
{
	my ($table, $repair, $settings) = @_;
	$settings //= 'SET claims_cell.verify_recent = 0;';
	return $node->safe_psql('cell1',
		"$settings\nSELECT * FROM claims_cell.verify('$table'"
		  . ($repair ? ', repair => true' : '') . ')');
}

# The claims of cell 1 at the store of a bucket and source type,
# "BUCKET:value:subject:source id hex" sorted.
sub store_claims
{
	my ($bucket, $source) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM (
  SELECT t.name || ':' || c.bucket_value || ':' || c.subject_id || ':' || encode(c.source_id, 'hex') AS v
    FROM claims c JOIN claim_bucket_types t ON t.type_id = c.bucket_type
    JOIN claim_source_types s ON s.type_id = c.source_type
   WHERE c.creator_id = 1 AND t.name = '$bucket' AND s.name = '$source') s});
}

# The same built from a table of cell 1.
sub cell_claims
{
	my ($bucket, $table, $column, $subject, $sid) = @_;
	return $node->safe_psql('cell1', qq{
SELECT coalesce(string_agg(v, ',' ORDER BY v), '') FROM (
  SELECT '$bucket:' || $column || ':' || $subject || ':' || encode($sid, 'hex') AS v
    FROM $table WHERE btrim(coalesce($column, '')) <> '') s});
}

my %users = (source => 'RAILS_TABLE_USERS', bucket => 'USERNAMES', table => 'users', column => 'username', subject => 'id',
	sid => 'int8send(id)');
my %emails = (source => 'RAILS_TABLE_USERS', bucket => 'EMAILS', table => 'users', column => 'email', subject => 'id',
	sid => 'int8send(id)');
my %projects = (source => 'RAILS_TABLE_PROJECTS', bucket => 'ROUTES', table => 'projects', column => 'path', subject => 'owner_id',
	sid => 'int8send(id::int8)');
my %gpg = (source => 'RAILS_TABLE_GPG_KEYS', bucket => 'GPG_KEY_FINGERPRINTS', table => 'gpg_keys', column => 'fingerprint',
	subject => 'user_id', sid => 'uuid_send(id)');
my %ssh = (source => 'RAILS_TABLE_KEYS', bucket => 'SSH_KEY_FINGERPRINTS', table => 'ssh_keys', column => 'fingerprint',
	subject => 'user_id', sid => "convert_to(fingerprint, 'UTF8')");

sub agree
{
	my ($t, $name) = @_;
	is(store_claims($t->{bucket}, $t->{source}), cell_claims(@$t{qw(bucket table column subject sid)}),
		"$name: the store holds exactly the table's claims");
}

# Claimed normally: 2500 users (keys on both sides of zero: the source id
# order puts negative keys after the positive ones), 30 projects, 20 gpg
# keys, 20 ssh keys; verify finds nothing.
$node->safe_psql('cell1', q{
INSERT INTO users SELECT i, 'user' || i, 'user' || i || '@example.com'
  FROM generate_series(-500, 2000) i WHERE i <> 0;
INSERT INTO projects (id, path, owner_id) SELECT i, 'group/p' || i, i FROM generate_series(1, 30) i;
INSERT INTO gpg_keys SELECT md5('k' || i)::uuid, 'GPG' || i, i FROM generate_series(1, 20) i;
INSERT INTO ssh_keys SELECT 'SHA256:' || i, i FROM generate_series(1, 20) i;
});
is(verify('users'), '0|0|0|0|0', 'a table claimed through its triggers has no drift');
is(verify('projects'), '0|0|0|0|0', 'no drift: integer keys');
is(verify('gpg_keys'), '0|0|0|0|0', 'no drift: uuid keys');
is(verify('ssh_keys'), '0|0|0|0|0', 'no drift: text keys');

# Drift behind the triggers: 5 rows inserted (10 values missing), 3 usernames
# renamed (3 missing, 3 extra), 3 rows deleted, among them the last one in
# source id order (-1: its claims lie past the table's last row), 6 extra,
# one email set to NULL (1 extra).
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users SELECT i, 'ghost' || i, 'ghost' || i || '@example.com' FROM generate_series(3001, 3005) i;
UPDATE users SET username = 'renamed' || id WHERE id IN (10, 11, -7);
DELETE FROM users WHERE id IN (2000, -3, -1);
UPDATE users SET email = NULL WHERE id = 42;
});
# An administrator removed 4 claims at the store.
$store->safe_psql('postgres', q{
SET ROLE cell_one;
SELECT claims_commit(1, (claims_begin_update('{"cell_id": 1, "destroy_records": [
  {"bucket": {"type": "USERNAMES", "value": "user100"}}, {"bucket": {"type": "USERNAMES", "value": "user-100"}},
  {"bucket": {"type": "EMAILS", "value": "user1500@example.com"}}, {"bucket": {"type": "EMAILS", "value": "user1@example.com"}}]}')
  ->> 'lease_uuid')::uuid);
});
my $before = store_claims('USERNAMES', 'RAILS_TABLE_USERS') . store_claims('EMAILS', 'RAILS_TABLE_USERS');
# missing: 10 + 3 + 4; extra: 3 + 6 + 1
is(verify('users'), '17|10|0|0|0', 'verify finds each drifted claim of users exactly');
is(store_claims('USERNAMES', 'RAILS_TABLE_USERS') . store_claims('EMAILS', 'RAILS_TABLE_USERS'), $before, 'without repair nothing changes at the store');

# Subjects and sources drifted: an owner changed, two paths swapped between rows.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
UPDATE projects SET owner_id = 99, updated_at = now() - interval '2 hours' WHERE id = 5;
UPDATE projects SET path = CASE id WHEN 7 THEN 'group/p8' ELSE 'group/p7' END,
                    updated_at = now() - interval '2 hours' WHERE id IN (7, 8);
UPDATE projects SET updated_at = now() - interval '2 hours';
DELETE FROM gpg_keys WHERE id = md5('k3')::uuid;
INSERT INTO ssh_keys VALUES ('SHA256:zz', 77);
});
is(verify('projects'), '0|0|3|0|0', 'an owner changed and two swapped paths are drifted');
is(verify('gpg_keys'), '0|1|0|0|0', 'uuid keys: a deleted row leaves an extra claim');
is(verify('ssh_keys'), '1|0|0|0|0', 'text keys: a row inserted behind the triggers is missing');

# Recency: the store's claims changed in the last hour are skipped (all of
# them, here), rows with a recent updated_at too; commit timestamps are off.
my $recent = verify('users', 0, '');
like($recent, qr/^17\|0\|0\|0\|\d+$/, 'with verify_recent = 1h the freshly changed claims are skipped');
ok((split /\|/, $recent)[4] >= 10, 'the extra claims count as skipped_recent');
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
UPDATE projects SET owner_id = 98, updated_at = now() WHERE id = 6;
});
$store->safe_psql('postgres', q{SET session_replication_role = replica;
UPDATE claims SET updated_at = now() - interval '2 hours' WHERE creator_id = 1});
is(verify('projects', 0, ''), '0|0|3|0|1', 'a row whose updated_at is recent is skipped');

# Repair: everything fixed, in leases with local rows; a second verify finds nothing.
is(verify('users', 1), '17|10|0|27|0', 'repair fixes every drifted claim of users');
agree(\%users, 'usernames');
agree(\%emails, 'emails');
is(verify('users'), '0|0|0|0|0', 'a second verify finds nothing');
is(verify('projects', 1), '0|0|4|4|0', 'repair replaces drifted subjects and sources');
agree(\%projects, 'routes');
is(verify('gpg_keys', 1), '0|1|0|1|0', 'repair destroys the claim of a deleted uuid row');
agree(\%gpg, 'gpg keys');
is(verify('ssh_keys', 1), '1|0|0|1|0', 'repair creates the claim of a text-keyed row');
agree(\%ssh, 'ssh keys');
is(verify('projects') . verify('gpg_keys') . verify('ssh_keys'), '0|0|0|0|0' x 3,
	'a second verify of each finds nothing');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}),
	'0', 'every repair lease is committed at the store');

# A value another cell owns is reported and left; the others are repaired.
$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken-by-two')});
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (4001, 'taken-by-two', NULL), (4002, 'free-4002', NULL);
});
my ($out, $err) = ('', '');
$node->psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT * FROM claims_cell.verify('users', true)},
	stdout => \$out, stderr => \$err);
is($out, '2|0|0|1|0', 'a value claimed by another cell is not repaired, the rest is');
like($err, qr/could not repair the missing value USERNAMES=taken-by-two of table public.users: .*already claimed/,
	'the value another cell owns is named in a warning');
$node->safe_psql('cell1', q{SET session_replication_role = replica; DELETE FROM users WHERE id = 4001});

# A repair rolled back with its savepoint rolls its lease back at the store.
$node->safe_psql('cell1', q{
SET session_replication_role = replica; INSERT INTO users VALUES (4003, 'savepoint-4003', NULL);});
$node->safe_psql('cell1', q{
SET claims_cell.verify_recent = 0;
BEGIN;
SAVEPOINT s;
SELECT * FROM claims_cell.verify('users', true);
ROLLBACK TO s;
COMMIT;
});
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'savepoint-4003'}),
	'0', 'the repair of a rolled-back savepoint is not at the store');
is($store->safe_psql('postgres', q{SELECT state FROM claim_leases WHERE creator_id = 1 ORDER BY created_at DESC LIMIT 1}),
	'rolled_back', 'its lease is rolled back');
is(verify('users'), '1|0|0|0|0', 'the value is still missing');

# PREPARE TRANSACTION of a transaction holding repair leases is refused
# (prepared, they would stay outstanding at the store and its lease rows
# would hold up reconcile()); the abort rolls them back.
my ($prepare_rc, $prepare_out, $prepare_err) = $node->psql('cell1', q{SET claims_cell.verify_recent = 0;
BEGIN;
SELECT count(*) FROM claims_cell.verify('users', true);
PREPARE TRANSACTION 'repairs';});
like($prepare_err, qr/cannot prepare a transaction that holds leases of claims_cell\.verify\(\) repairs/,
	'a transaction holding repair leases cannot be prepared');
is($node->safe_psql('cell1', q{SELECT count(*) FROM pg_prepared_xacts}), '0', 'nothing is prepared');
is($store->safe_psql('postgres', q{SELECT state FROM claim_leases WHERE creator_id = 1 ORDER BY created_at DESC LIMIT 1}),
	'rolled_back', 'and its lease is rolled back');
is(verify('users'), '1|0|0|0|0', 'the value is still missing after the refused PREPARE');

# A crash in the middle of a repair: the lease is outstanding at the store,
# its local row never committed; reconcile() rolls it back, verify repairs.
my %h = (in => q{SET claims_cell.verify_recent = 0;
BEGIN;
SELECT * FROM claims_cell.verify('users', true);
}, out => '', err => '');
$h{h} = IPC::Run::start([ 'psql', '-X', '-q', '-A', '-t', '-h', $node->host, '-p', $node->port, '-d', 'cell1' ],
	'<', \$h{in}, '>', \$h{out}, '2>', \$h{err});
$h{h}->pump until $h{out} =~ /\|/;
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'savepoint-4003' AND lease_uuid IS NOT NULL}),
	'1', 'the repair holds a lease while its transaction is open');
$node->stop('immediate');
$node->start;
$h{h}->kill_kill;
# reconcile until the lease is settled (it fences first, then rolls back),
# bounded by the usual test timeout rather than a count of tries
my $settled = '';
my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $give_up)
{
	$settled = $node->safe_psql('cell1', q{
SET claims_cell.stale_after = 0; SELECT * FROM claims_cell.reconcile(true)});
	last if $store->safe_psql('postgres',
		q{SELECT count(*) FROM claim_leases WHERE creator_id = 1 AND state = 'outstanding'}) eq '0';
	sleep(0.2);
}
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'savepoint-4003'}),
	'0', 'reconcile() rolls back the lease of the crashed repair');
is(verify('users', 1), '1|0|0|1|0', 'verify repairs it afterwards');
agree(\%users, 'usernames after the crash');
is(verify('users'), '0|0|0|0|0', 'and finds nothing the second time');

# Backfill: a column claimed after it held 10,000 rows.
$node->safe_psql('cell1', q{
CREATE TABLE emails (id integer PRIMARY KEY, email text, user_id bigint);
INSERT INTO emails SELECT i, 'backfill' || i || '@example.org', i FROM generate_series(1, 10000) i;
SELECT claims_cell.claim_column('emails', 'email', 'EMAILS', 'USER', 'user_id');
});
my %backfill = (source => 'RAILS_TABLE_EMAILS', bucket => 'EMAILS', table => 'emails', column => 'email', subject => 'user_id',
	sid => 'int8send(id::int8)');
is(verify('emails'), '10000|0|0|0|0', 'a column claimed after it held 10,000 rows: 10,000 missing');
is(verify('emails', 1), '10000|0|0|10000|0', 'the backfill claims all of them');
is($store->safe_psql('postgres', q{
SELECT count(*) FROM claims c JOIN claim_source_types s ON s.type_id = c.source_type
 WHERE c.creator_id = 1 AND s.name = 'RAILS_TABLE_EMAILS' AND c.status = 'ACTIVE'}),
	'10000', 'the store holds the 10,000 claims, active');
is($store->safe_psql('postgres', q{
SELECT count(*) FILTER (WHERE state = 'committed'), max(jsonb_array_length(payload->'create_records'))
  FROM claim_leases WHERE creator_id = 1 AND created_at > now() - interval '1 minute'
   AND payload->'create_records'->0->'source'->>'type' = 'RAILS_TABLE_EMAILS'}),
	'10|1000', 'in 10 committed leases of at most 1000 records');
is(verify('emails'), '0|0|0|0|0', 'a second verify of the backfill finds nothing');

# A value moved to a row of another batch behind the triggers is drifted,
# replaced at the store, never destroyed: here from row 12 (batch 1) to a
# new row 10500 (the last batch), whose batch then skips it as moved.
$node->safe_psql('cell1', q{SET session_replication_role = replica;
UPDATE emails SET id = 10500 WHERE id = 12});
is(verify('emails'), '0|0|1|0|0', 'a value moved to a later batch is drifted, not extra and missing');
is(verify('emails', 1), '0|0|1|1|0', 'repair replaces it');
agree(\%backfill, 'emails after a move to a later batch');
# The other way round (row 5000 to a new row 0, which comes first) the
# first batch cannot know yet: missing there (its claim refused: the value
# is this cell's), drifted and replaced in the batch of row 5000.
$node->safe_psql('cell1', q{SET session_replication_role = replica;
UPDATE emails SET id = 0 WHERE id = 5000});
is(verify('emails', 1), '1|0|1|1|0', 'a value moved to an earlier batch is replaced as well');
agree(\%backfill, 'emails after a move to an earlier batch');
is(verify('emails'), '0|0|0|0|0', 'and a second verify finds nothing');

# A paused column claiming the same bucket and source type as a claimed one
# would make its claims look extra: verify refuses (0A000), changes nothing.
$node->safe_psql('cell1', q{
CREATE TABLE profiles (id bigint PRIMARY KEY, email text, commit_email text);
SELECT claims_cell.claim_column('profiles', 'email', 'EMAILS', 'USER', 'id', 'RAILS_TABLE_MEMBERS');
SELECT claims_cell.claim_column('profiles', 'commit_email', 'EMAILS', 'USER', 'id', 'RAILS_TABLE_MEMBERS');
INSERT INTO profiles VALUES (1, 'p1@example.net', 'p1-commit@example.net');
SELECT claims_cell.set_claiming('profiles', 'commit_email', false);
});
my ($rc, $out, $err) = $node->psql('cell1', q{SET claims_cell.verify_recent = 0;
SELECT * FROM claims_cell.verify('profiles', true)}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/0A000: cannot verify table public.profiles: its paused column commit_email claims the same bucket type EMAILS/,
	'a paused column sharing the bucket and source type: 0A000');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value LIKE 'p1%@example.net'}),
	'2', 'and both claims stay at the store');
$node->safe_psql('cell1', q{SELECT claims_cell.set_claiming('profiles', 'commit_email', true)});
is(verify('profiles'), '0|0|0|0|0', 'resumed, the table verifies');

# A text key longer than the store's 128 bytes (its row claims nothing) as
# the last of a batch: skipped, never sent as a listing bound.
$node->safe_psql('cell1', q{
CREATE TABLE deploy_keys (k text COLLATE "C" PRIMARY KEY, fp text, user_id bigint);
INSERT INTO deploy_keys SELECT 'k' || lpad(i::text, 4, '0'), 'deploy-fp-' || i, i FROM generate_series(1, 1200) i WHERE i <> 1000;
INSERT INTO deploy_keys VALUES ('k0999' || repeat('x', 200), NULL, 1);
SELECT claims_cell.claim_column('deploy_keys', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'user_id', 'RAILS_TABLE_SNIPPETS');
});
is(verify('deploy_keys', 1), '1199|0|0|1199|0', 'a key over 128 bytes at a batch end is skipped');
is(verify('deploy_keys'), '0|0|0|0|0', 'and the table verifies clean');

# Integer-valued buckets: only values the trigger would claim count (not
# 042, not beyond the int64 range).
$node->safe_psql('cell1', q{
CREATE TABLE project_refs (id bigint PRIMARY KEY, ref text, owner_id bigint);
SELECT claims_cell.claim_column('project_refs', 'ref', 'PROJECT_IDS', 'USER', 'owner_id', 'RAILS_TABLE_PROJECT_SETTINGS');
SET session_replication_role = replica;
INSERT INTO project_refs VALUES (1, '42', 1), (2, '042', 1), (3, '9999999999999999999', 1),
  (4, '-9223372036854775808', 1);
});
is(verify('project_refs', 1), '2|0|0|2|0', 'only canonical int64 values are claimed');
is(verify('project_refs'), '0|0|0|0|0', 'and the table verifies clean');

# The background worker's schedule, one batch a slice (max_time 0): a run
# resumes after a restart where verify_progress says it stopped, and its
# counts add up over the slices.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
DELETE FROM emails WHERE id IN (500, 5500, 9999);
INSERT INTO emails VALUES (20000, 'late@example.org', 20000);
});
$store->safe_psql('postgres', q{SET session_replication_role = replica;
UPDATE claims SET updated_at = now() - interval '2 hours' WHERE creator_id = 1});
$node->append_conf('postgresql.conf', "claims_cell.verify_interval = '1s'\n");
$node->reload;
wait_setting('claims_cell.verify_interval', '1s');
sleep(1.1);    # a second passes: the tables are due (more time only helps)
my ($slices, $midway, $restarted) = (0, 0, 0);
while ($slices++ < 200)
{
	$node->safe_psql('cell1', q{SELECT count(*) FROM claims_cell.verify_due('0')});
	my $p = $node->safe_psql('cell1', q{
SELECT run_started_at IS NOT NULL, resume_after IS NOT NULL, last_finished_at IS NOT NULL
  FROM claims_cell.verify_progress WHERE table_name = 'emails'::regclass});
	last if $p =~ /\|t$/;
	if ($p eq 't|t|f')
	{
		$midway++;
		if (!$restarted++)
		{
			$node->restart;
		}
	}
}
ok($midway >= 5, "a run of 10,000 rows takes many slices ($midway seen midway)");
is($node->safe_psql('cell1', q{
SELECT missing, extra, drifted, repaired, skipped_recent, run_started_at IS NULL, resume_after IS NULL
  FROM claims_cell.verify_progress WHERE table_name = 'emails'::regclass}),
	'1|3|0|4|0|t|t', 'the run resumed after the restart and its counts add up');
agree(\%backfill, 'emails after the scheduled run');

# The worker itself: it verifies on its own and counts it.
$node->safe_psql('cell1', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (5001, 'worker-5001', 'worker-5001@example.com');
});
$node->append_conf('postgresql.conf', qq{
claims_cell.database = 'cell1'
claims_cell.reconcile_interval = '1s'
});
$node->reload;
ok($node->poll_query_until('cell1', q{SELECT verify_runs > 0 AND verify_repaired >= 2 FROM claims_cell.stats}),
	'the worker verifies the claimed tables and counts the runs and repairs');
agree(\%users, 'usernames after the worker');
ok($node->log_contains(qr/claims_cell: verified table public\.users: 2 missing, 0 extra, 0 drifted, 2 repaired/),
	'the worker logs the counts of a run');

# With finish_leases_in = 'worker', a savepoint's repair lease is still
# rolled back at once, not handed to the worker: the same transaction's
# next verify finds the value missing and repairs it.
$node->append_conf('postgresql.conf', "claims_cell.verify_interval = 0\n");
$node->reload;
# A cycle of the worker forked after the reload verifies nothing; one
# forked before it may still be verifying: wait until it has exited.
wait_setting('claims_cell.verify_interval', '0');
my $reloaded = $node->safe_psql('cell1', 'SELECT now()');
ok( $node->poll_query_until('cell1', qq{
SELECT count(*) = 0 FROM pg_stat_activity
 WHERE backend_type = 'claims_cell worker cycle' AND backend_start < '$reloaded'}),
	'no worker cycle from before the reload is left');
$node->safe_psql('cell1', q{
SET session_replication_role = replica; INSERT INTO users VALUES (5002, 'handoff-5002', NULL);});
is($node->safe_psql('cell1', q{
SET claims_cell.verify_recent = 0;
SET claims_cell.finish_leases_in = 'worker';
BEGIN;
SAVEPOINT s;
SELECT repaired FROM claims_cell.verify('users', true);
ROLLBACK TO s;
SELECT * FROM claims_cell.verify('users', true);
COMMIT;
}), "1\n1|0|0|1|0", 'a savepoint rolled back under finish_leases_in = worker: its lease is gone at once');
# The worker commits the second repair's lease at the store after the
# COMMIT: wait for it rather than race it.
ok($store->poll_query_until('postgres', q{SELECT status = 'ACTIVE' FROM claims WHERE bucket_value = 'handoff-5002'}),
	'and the second repair holds');

done_testing();

# Wait until a new session of the cell sees a setting as SHOW prints it
# (a reload only signals the postmaster).
sub wait_setting
{
	my ($name, $value) = @_;
	$node->poll_query_until('cell1', "SELECT current_setting('$name') = '$value'")
	  or die "$name did not become $value";
	return;
}
