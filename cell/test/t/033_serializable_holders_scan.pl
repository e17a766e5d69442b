# Under SERIALIZABLE, two transactions that each insert a different value
# into the same claimed column (no unique index) both commit: the
# COMMIT-time check takes no predicate lock on the whole table.
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
CREATE TABLE plain (id bigint PRIMARY KEY, username text);
});

sub two_writers
{
	my ($table) = @_;
	my @s;
	for my $i (1, 2)
	{
		my $s = start_session($node, 'cell1', "BEGIN ISOLATION LEVEL SERIALIZABLE;\n"
			  . "INSERT INTO $table VALUES ($i, '$table-$i');\nSELECT 'inserted';\n");
		$s->{h}->pump until $s->{out} =~ /inserted/;
		push @s, $s;
	}
	for my $s (@s)
	{
		$s->{in} .= "COMMIT;\nSELECT 'done';\n";
		eval { $s->{h}->pump until $s->{out} =~ /done/ || $s->{err} =~ /ERROR/; };
		$s->{in} .= "\\q\n";
		eval { $s->{h}->finish; };
	}
	return join('', map { $_->{err} } @s);
}

my $err = two_writers('plain');
unlike($err, qr/ERROR/, 'two serializable inserts of different values into a plain table both commit');
$err = two_writers('users');
unlike($err, qr/ERROR/, 'two serializable inserts of different values into a claimed column both commit')
  or diag($err);
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '2', 'both rows are kept');

$node->stop;
$store->stop;
done_testing();
