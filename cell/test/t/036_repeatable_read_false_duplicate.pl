# Under REPEATABLE READ the COMMIT-time check of rows holding a value looks
# at the latest row versions, as a unique index does: a transaction taking
# a value that a concurrent transaction freed (deleted, claim released)
# commits, instead of failing with 23505 on the deleted row.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE indexed (id bigint PRIMARY KEY, username text UNIQUE);
SELECT claims_cell.claim_column('indexed', 'username', 'USERNAMES', 'USER', 'id', 'RAILS_TABLE_USERS');
});

my @psql = ('psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
	'-h', $node->host, '-p', $node->port, '-d', 'cell1');

sub take_freed_value
{
	my ($table, $value) = @_;
	$node->safe_psql('cell1', "INSERT INTO $table VALUES (1, '$value')");
	my %s = (in => "BEGIN ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM $table;\n",
		out => '', err => '');
	my $h = IPC::Run::start(\@psql, '<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, IPC::Run::timeout(180));
	$h->pump until $s{out} =~ /^1$/m;
	# another session deletes the holder and releases the claim
	$node->safe_psql('cell1', "DELETE FROM $table WHERE id = 1");
	$s{in} .= "INSERT INTO $table VALUES (2, '$value');\nCOMMIT;\nSELECT 'done';\n";
	eval { $h->pump until $s{out} =~ /done/ || $s{err} =~ /ERROR/; };
	$s{in} .= "\\q\n";
	eval { $h->finish; };
	return $s{err};
}

my $err = take_freed_value('indexed', 'carol');
unlike($err, qr/ERROR/, 'with a unique index: the freed value is taken under REPEATABLE READ') or diag($err);
$err = take_freed_value('users', 'dave');
unlike($err, qr/ERROR/, 'without one: the freed value is taken under REPEATABLE READ too') or diag($err);
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE bucket_value = 'dave' AND status = 'ACTIVE'}),
	'1', 'and claimed for its one row');

$node->stop;
$store->stop;
done_testing();
