# A fresh store connection sets claims.json_output = compat, so that the
# store answers in the mapping the cell parses whatever its role sets. Only a
# store without the setting (42704) may refuse that SET and still be used;
# any other error at that moment (here a 57014 a proxy injects once) fails
# the call, and the next call sets the connection up again, instead of
# keeping a connection that answers proto3 for the backend's life.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', role => 'cell_one', cell_id => 1,
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
$node->safe_psql('cell1', q{INSERT INTO users SELECT i, 'user' || i FROM generate_series(1, 300) i});

# The cell reaches the store through the proxy; the store answers cell_one in proto3.
my $flag = "$PostgreSQL::Test::Utils::tmp_check/inject_json_output";
my $proxy = start_inject_proxy($store, $node, 'cell1', $flag);
$store->safe_psql('postgres', q{ALTER ROLE cell_one SET claims.json_output = proto3});
my $verify = "SELECT missing, extra, drifted, repaired FROM claims_cell.verify('users')";
my $ok;
# until the test timeout: the proxy and a fresh connection through it may be
# slow on a loaded machine, and nothing here is about time
my $give_up = time() + $PostgreSQL::Test::Utils::timeout_default;
while (time() < $give_up)
{
	$ok = $node->psql('cell1', $verify) == 0 and last;
	usleep(200_000);
}
ok($ok, 'verify() through the proxy works');

# One session: its first call opens a connection whose SET fails once.
open my $f, '>', $flag or die "$flag: $!";
close $f;
my ($ret, $out, $err) =
  $node->psql('cell1', "\\set ON_ERROR_STOP 0\nSET claims_cell.verify_recent = 0;\n$verify;\n$verify;\n$verify;");
ok(!-e $flag, 'the error was injected');
like($err, qr/canceling statement due to user request/, 'the call whose setup failed reports the store\'s error');
unlike($err, qr/did not advance|not valid JSON|unexpected/, 'no call read a proto3 answer');
is($out, "0|0|0|0\n0|0|0|0", 'the next calls set the connection up again and verify the table');

# A store from before the setting that reserved the claims prefix refuses
# the SET with 42602: the session is used as it is, its calls succeed.
$store->safe_psql('postgres', q{ALTER ROLE cell_one RESET claims.json_output});
open $f, '>', $flag or die "$flag: $!";
print $f "42602\n";
close $f;
($ret, $out, $err) = $node->psql('cell1', "SET claims_cell.verify_recent = 0;\n$verify;\n$verify;");
ok(!-e $flag, 'the 42602 refusal was injected');
is($out, "0|0|0|0\n0|0|0|0", 'a store that reserved the prefix but has no setting is used') or diag($err);

kill 'TERM', $proxy;
waitpid($proxy, 0);
done_testing();
