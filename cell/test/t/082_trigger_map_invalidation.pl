# Review of ed761c5: the cache of mapped trigger columns (partitions.c)
# is destroyed by any relcache invalidation (cell_trigger_map_reset), also
# one accepted while cell_trigger_columns() builds an entry: the catalog
# reads of cell_declared_table() and cell_map_attnum() take new locks,
# which accept invalidations; the map is then NULL and hash_search(NULL,
# HASH_ENTER) crashes the server (SIGSEGV at partitions.c:182). Any DDL of
# another session (here ALTER TABLE of an unrelated table) committed while
# a statement writing a partition runs is enough; the slow BEFORE trigger
# only widens the window.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
$store->safe_psql('postgres', q{GRANT SELECT, INSERT ON claim_source_types TO cell_one});
my $node = cell_node('cells', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE race (id bigint, region text, u text, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE race_1 PARTITION OF race FOR VALUES IN ('x');
SELECT claims_cell.claim_column('race', 'u', 'USERNAMES', 'USER', 'id');
CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(3); RETURN NEW; END $$;
CREATE TRIGGER a_slow BEFORE INSERT ON race_1 FOR EACH ROW EXECUTE FUNCTION slow();
CREATE TABLE unrelated (id int);
});

my $t0 = Time::HiRes::time();
# t 0-3: a first insert fills the map; t 3-6: idle; t 6-9: the second
# insert's BEFORE trigger; its AFTER (collect) trigger builds the entry again
my $s = start_session($node, 'cell1', q{INSERT INTO race VALUES (1, 'x', 'race-1');
SELECT pg_sleep(3);
INSERT INTO race VALUES (2, 'x', 'race-2');
SELECT 'second insert done';
});
Time::HiRes::sleep(4.5 - (Time::HiRes::time() - $t0));
$node->safe_psql('cell1', 'ALTER TABLE unrelated ADD COLUMN a int');    # accepted at the second insert's start
Time::HiRes::sleep(7.5 - (Time::HiRes::time() - $t0));
$node->safe_psql('cell1', 'ALTER TABLE unrelated ADD COLUMN b int');    # pending while the map is built
$s->{h}->pump until $s->{out} =~ /second insert done/ || $s->{err} =~ /ERROR|server closed/;
$s->{h}->finish;
unlike($s->{err}, qr/server closed the connection/, 'a relcache invalidation while the trigger map is built does not crash the backend');
like($s->{out}, qr/second insert done/, 'the insert succeeds');

done_testing();
