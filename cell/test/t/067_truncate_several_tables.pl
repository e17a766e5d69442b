# One TRUNCATE that empties several claimed tables (a list, or a
# partitioned table's partitions) releases the values of all their rows.
# Every BEFORE TRUNCATE trigger of the statement fires before any table is
# emptied; when each claimed its releases at once, a row of a table not yet
# emptied counted as a row still holding the value, so a value held by rows
# of two of the tables stayed claimed with no row left (found by
# 066_random_invariants.pl: a partition's row and another partition's row
# inserted through the parent, then TRUNCATE of the parent). The releases
# are now claimed at the end of the TRUNCATE statement.
#
# Also here: an immediate column declared on a partition is leased at the
# end of a statement naming its (unclaimed) partitioned parent, whose
# statement trigger the declaration gave it (PostgreSQL fires statement
# triggers only for the table a statement names).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
CREATE INDEX ON users (username);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE orgs (id bigint PRIMARY KEY, path text);
CREATE INDEX ON orgs (path);
SELECT claims_cell.claim_column('orgs', 'path', 'USERNAMES', 'NAMESPACE', 'id', 'RAILS_TABLE_NAMESPACES');
CREATE TABLE keys (id bigint PRIMARY KEY, fp text) PARTITION BY RANGE (id);
CREATE TABLE keys_lo PARTITION OF keys FOR VALUES FROM (MINVALUE) TO (11);
CREATE TABLE keys_hi PARTITION OF keys FOR VALUES FROM (11) TO (MAXVALUE);
CREATE INDEX ON keys (fp);
SELECT claims_cell.claim_column('keys_lo', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_KEYS');
SELECT claims_cell.claim_column('keys_hi', 'fp', 'SSH_KEY_FINGERPRINTS', 'USER', 'id', 'RAILS_TABLE_GPG_KEYS');
});

sub claims_of
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || subject_id, ',' ORDER BY bucket_value), '')
  FROM claims WHERE bucket_value LIKE '$like'});
}

# A value held by a row of users and by a row of orgs written before it was
# claimed (behind the triggers): TRUNCATE of one table keeps it claimed for
# the other's row, TRUNCATE of both releases it.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'both'), (2, 'alone');
SET session_replication_role = replica; INSERT INTO orgs VALUES (3, 'both');});
$node->safe_psql('cell1', q{BEGIN; TRUNCATE users; ROLLBACK;});
is(claims_of('both'), 'both:ACTIVE:1', 'a rolled back TRUNCATE changes nothing');
$node->safe_psql('cell1', q{TRUNCATE users, orgs});
is(claims_of('%'), '', 'TRUNCATE of both tables releases the value both held');

$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'both');
SET session_replication_role = replica; INSERT INTO orgs VALUES (3, 'both');});
$node->safe_psql('cell1', q{TRUNCATE users});
is(claims_of('both'), 'both:ACTIVE:3', 'TRUNCATE of one keeps it claimed for the other\'s row');
$node->safe_psql('cell1', q{TRUNCATE orgs});
is(claims_of('both'), '', 'and TRUNCATE of the other releases it');

# Two partitions, truncated through their parent, in a transaction that
# wrote one of the rows through the parent (the fuzz test's case, from when
# a partition's declaration claimed such a row only at COMMIT; now the
# second holder is written under the replica role).
$node->safe_psql('cell1', q{INSERT INTO keys VALUES (16, 'k04'), (12, 'k08')});
$node->safe_psql('cell1', q{BEGIN ISOLATION LEVEL SERIALIZABLE;
SET LOCAL session_replication_role = replica; INSERT INTO keys VALUES (7, 'k04'); RESET session_replication_role;
SAVEPOINT s1; TRUNCATE keys; RELEASE SAVEPOINT s1; COMMIT;});
is($node->safe_psql('cell1', 'SELECT count(*) FROM keys'), '0', 'the partitioned table is empty');
is(claims_of('k%'), '', 'TRUNCATE of the parent releases the values of every partition');

# The same TRUNCATE in a PL/pgSQL block, and one that fails: nothing is released.
$node->safe_psql('cell1', q{INSERT INTO keys VALUES (1, 'k01'), (13, 'k01b')});
$node->safe_psql('cell1', q{DO $$ BEGIN EXECUTE 'TRUNCATE keys'; END $$});
is(claims_of('k%'), '', 'a TRUNCATE run by a function releases too');
$node->safe_psql('cell1', q{INSERT INTO keys VALUES (2, 'k02')});
my ($st) = sql_state($node, 'cell1', q{BEGIN; TRUNCATE keys; SELECT 1/0; COMMIT;});
is($st, '22012', 'a transaction fails after its TRUNCATE');
is(claims_of('k%'), 'k02:ACTIVE:2', 'its releases are rolled back');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
	'no lease is left outstanding');

{
	my $s = $node->background_psql('cell1');
	$s->query_safe(q{BEGIN; INSERT INTO keys VALUES (3, 'k-now')});
	is(claims_of('k-now'), 'k-now:LEASE_CREATING:3', 'a partition\'s value is leased at the end of the statement');
	$s->query_safe('COMMIT');
	$s->quit;
}
is(claims_of('k-now'), 'k-now:ACTIVE:3', 'it is claimed at COMMIT');

done_testing();
