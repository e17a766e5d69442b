
# claims_check() itself: empty on a healthy store, and each kind of damage
# is reported under its invariant name, with the claim and lease at fault.
# The damage is done by hand inside transactions that are rolled back.
# Only operators may run it.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_claims_node('check');

sub api
{
	my ($sql) = @_;
	return $node->safe_psql('postgres', $sql);
}

sub begin_update
{
	my ($req) = @_;
	return api('SELECT claims_begin_update(' . sql_quote(enc($req)) . "::jsonb)->>'lease_uuid'");
}

# A committed claim per cell, an outstanding create, an outstanding replace,
# an outstanding destroy, and a committed integer-valued claim.
my %lease;
for my $cell (1 .. 2)
{
	$lease{"c$cell"} = begin_update({ cell_id => $cell,
		create_records => [ metadata('USERNAMES', "user$cell", $cell, $cell),
			metadata('PROJECT_IDS', "4$cell", $cell, $cell) ] });
	api("SELECT claims_commit($cell, '$lease{\"c$cell\"}')");
}
$lease{creating} = begin_update({ cell_id => 1, create_records => [ metadata('EMAILS', 'new@check.test', 5, 5) ] });
$lease{replacing} = begin_update({ cell_id => 2, create_records => [ metadata('USERNAMES', 'user2', 6, 6) ],
	destroy_records => [ bucket_only('USERNAMES', 'user2') ] });
$lease{destroying} = begin_update({ cell_id => 1, destroy_records => [ bucket_only('PROJECT_IDS', '41') ] });

is(join("\n", claims_check_rows($node)), '', 'claims_check() is empty on a healthy store');

# Damage applied in a rolled-back transaction; returns the invariant names
# reported (sorted, unique) and the rows.
sub damaged
{
	my ($sql) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', <<"EOS");
BEGIN;
ALTER TABLE claims DROP CONSTRAINT claims_lease_matches_status;
ALTER TABLE claims DROP CONSTRAINT claims_replace_only_while_destroying;
ALTER TABLE claim_leases DROP CONSTRAINT claim_leases_finished_when_done;
ALTER TABLE claim_leases DROP CONSTRAINT claim_leases_keys_match;
$sql;
SELECT invariant, coalesce(claim_uuid::text, '-'), coalesce(lease_uuid::text, '-') FROM claims_check();
ROLLBACK;
EOS
	die "damage failed: $err" if $rc != 0;
	my %names = map { (split /\|/)[0] => 1 } grep { /\|/ } split /\n/, $out;
	return (join(',', sort keys %names), $out);
}

my $claim_of = sub {
	my ($value) = @_;
	return api("SELECT uuid FROM claims WHERE bucket_value = " . sql_quote($value));
};

my @cases = (
	[ 'claim_status_lease_mismatch', "UPDATE claims SET status = 'ACTIVE' WHERE bucket_value = 'new\@check.test'",
		'claim_status_lease_mismatch' ],
	[ 'claim_lease_missing,lost_lease',
		"UPDATE claims SET lease_uuid = '00000000-0000-0000-0000-000000000001' WHERE bucket_value = 'new\@check.test'",
		'lease of a claim does not exist' ],
	[ 'claim_lease_not_outstanding',
		"UPDATE claim_leases SET state = 'committed', finished_at = now() WHERE uuid = '$lease{creating}'",
		'claim under a finished lease' ],
	[ 'lost_lease', "UPDATE claims SET lease_uuid = NULL, status = 'ACTIVE' WHERE bucket_value = 'new\@check.test'",
		'outstanding lease lost its claim' ],
	[ 'lost_lease', "DELETE FROM claims WHERE bucket_value = 'new\@check.test'",
		'outstanding lease whose claim row is gone' ],
	[ 'claim_not_listed_in_lease,lease_creates_only_mismatch,lease_holds_other_cells_claim,lost_lease',
		"UPDATE claims SET lease_uuid = '$lease{creating}', status = 'LEASE_DESTROYING' WHERE bucket_value = 'user2'",
		'claim moved under a lease of another cell' ],
	[ 'claim_replace_without_lease',
		"UPDATE claims SET replace_subject_type = 4, replace_subject_id = 1, replace_source_type = 1, replace_source_id = '\\x01' WHERE bucket_value = 'user1'",
		'replace data without a lease' ],
	[ 'claim_replace_not_destroying',
		"UPDATE claims SET replace_subject_type = 4, replace_subject_id = 1, replace_source_type = 1, replace_source_id = '\\x01' WHERE bucket_value = 'new\@check.test'",
		'replace data on a creating row' ],
	[ 'claim_replace_incomplete', "UPDATE claims SET replace_source_id = NULL WHERE bucket_value = 'user2'",
		'replace data partly missing' ],
	[ 'claim_digest_mismatch', "UPDATE claims SET bucket_value = 'user9' WHERE bucket_value = 'user1'",
		'value does not match its digest' ],
	[ 'claim_value_not_canonical_integer',
		"UPDATE claims SET bucket_value = '042', bucket_digest = sha256('042') WHERE bucket_value = '42'",
		'integer value with a leading zero' ],
	[ 'unregistered_bucket_type', "UPDATE claims SET bucket_type = 14 WHERE bucket_value = 'user1'",
		'bucket type not registered' ],
	[ 'unregistered_subject_type', "UPDATE claims SET subject_type = 99 WHERE bucket_value = 'user1'",
		'subject type not registered' ],
	[ 'unregistered_source_type', "UPDATE claims SET source_type = 0 WHERE bucket_value = 'user1'",
		'source type not registered' ],
	[ 'lease_finished_at_mismatch', "UPDATE claim_leases SET finished_at = NULL WHERE uuid = '$lease{c1}'",
		'finished lease without finished_at' ],
	[ 'lease_finished_at_mismatch', "UPDATE claim_leases SET finished_at = now() WHERE uuid = '$lease{destroying}'",
		'outstanding lease with finished_at' ],
	[ 'lease_keys_malformed',
		"UPDATE claim_leases SET claim_types = claim_types || claim_types, claim_digests = claim_digests || claim_digests WHERE uuid = '$lease{creating}'",
		'lease listing a key twice' ],
	[ 'lease_keys_malformed,lost_lease',
		"UPDATE claim_leases SET claim_types = claim_types || 4 WHERE uuid = '$lease{creating}'",
		'lease key arrays of different lengths' ],
	[ 'lease_creates_only_mismatch',
		"UPDATE claim_leases SET creates_only = true WHERE uuid = '$lease{destroying}'",
		'destroying lease marked creates-only' ],
	[ 'lease_payload_cell_mismatch',
		"UPDATE claim_leases SET payload = jsonb_set(payload, '{cell_id}', '7') WHERE uuid = '$lease{destroying}'",
		'lease request of another cell' ],
);
for my $case (@cases)
{
	my ($want, $sql, $what) = @$case;
	my ($got, $rows) = damaged($sql);
	is($got, $want, "reported: $what") or diag($rows);
}

# The claim and lease named in a row are the ones at fault.
my ($got, $rows) = damaged("UPDATE claims SET status = 'ACTIVE' WHERE bucket_value = 'new\@check.test'");
like($rows, qr/claim_status_lease_mismatch\|\Q${\ $claim_of->('new@check.test')}\E\|\Q$lease{creating}\E/,
	'a row names the claim and the lease at fault');

# Operators only.
api('CREATE ROLE app LOGIN');
my ($rc, $out, $err) = $node->psql('postgres', 'SET ROLE app; SELECT * FROM claims_check()');
like($err, qr/permission denied for function claims_check/, 'PUBLIC may not run claims_check()');
api('GRANT EXECUTE ON FUNCTION claims_check() TO app');
($rc, $out, $err) = $node->psql('postgres', 'SET ROLE app; SELECT count(*) FROM claims_check()');
is($out, '0', 'a role granted EXECUTE runs it (as the extension owner)');

# A hostile search_path does not change what it reads.
($rc, $out, $err) = $node->psql('postgres', <<'EOS');
CREATE SCHEMA evil;
CREATE TABLE evil.claims (LIKE public.claims);
CREATE FUNCTION evil.sha256(bytea) RETURNS bytea LANGUAGE sql AS 'SELECT ''\x00''::bytea';
SET search_path = evil, public;
SELECT count(*) FROM claims_check();
EOS
is($out, '0', 'claims_check() ignores the caller\'s search_path');

$node->stop;
done_testing();
