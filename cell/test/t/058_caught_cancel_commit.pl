# A cancel belongs to the call it interrupted. A statement ended by
# statement_timeout while its call waited at the store, then caught (a
# savepoint rolled back, as Rails' requires_new block with a rescue does),
# must not make the transaction's later calls give up: the savepoint's
# rollback and the COMMIT's claims_commit reach the store. Before, the flag
# an interrupted call left stayed set until the next interruptible call,
# so the COMMIT committed the row and left its lease outstanding.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use IPC::Run ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
# a call may wait at the store far longer than the statement's timeout
my $node = cell_node('cells', "claims_cell.call_timeout = '60s'\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});

# Cell 2 leases a value in a store transaction left open: cell 1's
# begin_update of it waits on that row at the store until it ends.
my %hold = (in => '', out => '', err => '');
$hold{h} = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-h', $store->host, '-p', $store->port, '-d', 'postgres' ],
	'<', \$hold{in}, '>', \$hold{out}, '2>', \$hold{err}, IPC::Run::timeout(180));
$hold{in} .= q{BEGIN;
SET ROLE cell_two;
SELECT claims_begin_update('{"cell_id": 2, "create_records": [{"bucket": {"type": "USERNAMES", "value": "blocked"}, "subject": {"type": "USER", "id": 9}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 9}}]}') IS NOT NULL AS held;
};
$hold{h}->pump until $hold{out} =~ /^t$/m;

sub outstanding
{
	my ($cell) = @_;
	return $store->safe_psql('postgres',
		"SELECT count(*) FROM claim_leases WHERE creator_id = $cell AND state = 'outstanding'");
}

for my $case ([ 'savepoint', 'SAVEPOINT s;', 'ROLLBACK TO SAVEPOINT s;' ],
	[ 'exception block', '', '' ])
{
	my ($name, $save, $back) = @$case;
	my $kept = "kept-$name";
	$kept =~ s/ /-/g;
	my $blocked = $name eq 'savepoint'
	  ? qq{$save
SET LOCAL statement_timeout = '300ms';
INSERT INTO users VALUES (2, 'blocked');}
	  : q{SET LOCAL statement_timeout = '300ms';
DO $$
BEGIN
    INSERT INTO users VALUES (3, 'blocked');
EXCEPTION WHEN query_canceled THEN
    RAISE NOTICE 'caught %', SQLSTATE;
END $$;};
	my $sql = $name eq 'savepoint'
	  ? qq{BEGIN;
INSERT INTO users VALUES (1, '$kept');
$blocked
\\echo after_timeout
$back
RESET statement_timeout;
COMMIT;}
	  : qq{BEGIN;
INSERT INTO users VALUES (4, '$kept');
$blocked
SET LOCAL statement_timeout = 0;
COMMIT;};
	my ($out, $err) = ('', '');
	$node->psql('cell1', $sql, stdout => \$out, stderr => \$err, on_error_stop => 0);
	like($err, $name eq 'savepoint' ? qr/canceling statement due to statement timeout/ : qr/caught 57014/,
		"$name: the claiming statement was cancelled while its call waited at the store");
	is( $store->safe_psql('postgres', "SELECT status || ':' || creator_id FROM claims WHERE bucket_value = '$kept'"),
		'ACTIVE:1', "$name: the COMMIT committed the lease of the row kept before it");
	is(outstanding(1), '0', "$name: no lease of cell 1 stays outstanding");
	is($node->safe_psql('cell1', "SELECT count(*) FROM users WHERE username = '$kept'"), '1',
		"$name: the row is committed");
}

$hold{in} .= "ROLLBACK;\n\\q\n";
$hold{h}->finish;
is(outstanding(2), '0', 'cell 2\'s lease is gone with its transaction');
is($node->safe_psql('cell1', q{SELECT sum(missing + extra + drifted) FROM claims_cell.verify('users')}), '0',
	'verify() finds the cell and the store in agreement');

done_testing();
