# Transactions with more claimed changes than one lease may carry: they
# take several leases in one COMMIT, all committed or all rolled back.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells');
my %role = (cell1 => 'cell_one', cell2 => 'cell_two');
for my $db ('cell1', 'cell2')
{
	add_cell(node => $node, store => $store, db => $db, cell_id => $db eq 'cell1' ? 1 : 2,
		role => $role{$db}, sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}

# Run SQL in cell 1: (SQLSTATE or '00000', stderr).
sub run
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	$node->psql('cell1', "\\set VERBOSITY verbose\n$sql", stdout => \$out, stderr => \$err,
		on_error_stop => 1);
	return ($err =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : '00000', $err);
}

# A query at the store.
sub at_store { return $store->safe_psql('postgres', $_[0]); }

# begin_update calls of cell 1 so far.
sub begins { return $node->safe_psql('cell1', 'SELECT begin_updates FROM claims_cell.stats'); }

# Cell 1's users and the store's active claims of cell 1 agree, nothing outstanding.
sub agree
{
	my ($step) = @_;
	is( at_store(q{SELECT count(*) || ':' || coalesce(sum(subject_id), 0) FROM claims
		 WHERE creator_id = 1 AND status = 'ACTIVE'}),
		$node->safe_psql('cell1', q{SELECT count(*) || ':' || coalesce(sum(id), 0) FROM users
		 WHERE username IS NOT NULL}),
		"$step: cell 1 and the store agree");
	is(at_store(q{SELECT count(*) FROM claim_leases WHERE state = 'outstanding'}), '0',
		"$step: no lease outstanding at the store");
}

# Default limit (1000): 2500 rows in one statement take three leases.
my $b0 = begins();
is((run(q{INSERT INTO users SELECT i, 'user' || i FROM generate_series(1, 2500) i}))[0], '00000',
	'INSERT of 2500 claimed values commits');
is(begins() - $b0, 3, 'three leases of at most 1000 records');
is(at_store(q{SELECT count(*) FROM claim_leases WHERE creator_id = 1}), '3',
	'three leases at the store');
agree('2500 rows');

# A replace (same value, new subject) is two records that stay in one lease.
$b0 = begins();
is( ( run(q{SET claims_cell.max_batch_size = 3;
	UPDATE users SET id = id + 10000 WHERE id <= 5}))[0], '00000',
	'five replaces with a limit of 3 records');
is(begins() - $b0, 5, 'one lease per replace: its two records are never split');
agree('replaces');

# A refusal in a later lease rolls back the leases taken before it.
$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken12')});
$b0 = begins();
my ($st, $err) = run(q{SET claims_cell.max_batch_size = 10;
	INSERT INTO users SELECT 5000 + i, 'taken' || i FROM generate_series(1, 15) i});
is($st, '23505', 'a value taken elsewhere in the second lease: 23505');
like($err, qr/value "taken12" of column "username"/, 'naming the value');
is(begins() - $b0, 2, 'the first lease was taken, the second refused');
is(at_store(q{SELECT count(*) FROM claims WHERE creator_id = 1 AND bucket_value LIKE 'taken%'}),
	'0', 'the first lease was rolled back at the store');
is($node->safe_psql('cell1', q{SELECT count(*) FROM users WHERE id > 5000 AND id < 6000}), '0',
	'nothing kept locally');
agree('refusal in a later lease');

# A cell limit above the store's: the store's 54000, with what to change.
at_store(q{ALTER SYSTEM SET claims.max_batch_size = 5; SELECT pg_reload_conf()});
# the reload only signals: wait until new store sessions have the limit
$store->poll_query_until('postgres', q{SELECT current_setting('claims.max_batch_size') = '5'})
  or die 'claims.max_batch_size = 5 was not applied';
($st, $err) = run(q{SET claims_cell.max_batch_size = 10;
	INSERT INTO users SELECT 6000 + i, 'big' || i FROM generate_series(1, 8) i});
is($st, '54000', 'a lease larger than the store allows: 54000');
like($err, qr/HINT:\s+Set claims_cell.max_batch_size no higher than the store's claims.max_batch_size/,
	'the hint names both settings');
is((run(q{SET claims_cell.max_batch_size = 5;
	INSERT INTO users SELECT 6000 + i, 'big' || i FROM generate_series(1, 8) i}))[0], '00000',
	'with the cell at the store\'s limit it commits in two leases');
agree('store limit');

$node->stop;
$store->stop;
done_testing();
