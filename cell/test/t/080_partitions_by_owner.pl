# Review of ed761c5 (claimed partitioned tables): paths without a test.
# 1. A non-superuser owner of a claimed partitioned table (delegated
#    claiming, or just the application role owning it) cannot add a
#    partition: PostgreSQL clones the row trigger with isInternal = false,
#    so CREATE TABLE ... PARTITION OF and ATTACH PARTITION check EXECUTE on
#    claims_cell.collect() for the user, and fail with "permission denied
#    for function " (an empty name: the clone's funcname is NIL).
# 2. DETACH PARTITION is documented as unclaim_column for that partition
#    ("its values stay claimed at the store"), but the next verify() of
#    the parent finds them extra (they carry the parent's source type) and
#    releases them, while the detached table still holds them: another
#    cell can then take them.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
$store->safe_psql('postgres', q{GRANT SELECT, INSERT ON claim_source_types TO cell_one});
my $node = cell_node('cells', "claims_cell.verify_interval = 0\n");
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one', sql => q{
CREATE ROLE app LOGIN;
GRANT CREATE ON SCHEMA public TO app;
GRANT USAGE ON SCHEMA claims_cell TO app;
GRANT EXECUTE ON FUNCTION claims_cell.claim_column(regclass, name, text, text, name, text, boolean, boolean),
                          claims_cell.set_claiming(regclass, name, boolean),
                          claims_cell.unclaim_column(regclass, name) TO app;
});
add_cell(node => $node, store => $store, db => 'cell2', cell_id => 2, role => 'cell_two', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
INSERT INTO users VALUES (1, 'taken');
});

sub store_claims
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || creator_id, ',' ORDER BY bucket_value), '')
  FROM claims WHERE bucket_value LIKE '$like'});
}

# 1. The role that owns (and claimed) a partitioned table adds a partition.
my ($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app;
CREATE TABLE events (id bigint, region text, slug text, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE events_eu PARTITION OF events FOR VALUES IN ('eu');
SELECT claims_cell.claim_column('events', 'slug', 'USERNAMES', 'USER', 'id');});
is($st, '00000', 'a delegated role claims its partitioned table') or diag($err);
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app;
CREATE TABLE events_us PARTITION OF events FOR VALUES IN ('us');});
is($st, '00000', 'the owner of a claimed partitioned table can create a partition of it') or diag($err);
($st, $out, $err) = sql_state($node, 'cell1', q{SET ROLE app;
CREATE TABLE events_af (id bigint NOT NULL, region text NOT NULL, slug text);
ALTER TABLE events ATTACH PARTITION events_af FOR VALUES IN ('af');});
is($st, '00000', 'and attach one') or diag($err);
unlike($err, qr/permission denied for function $/m, 'no error naming an empty function');

# 2. DETACH, then verify() of the parent.
$node->safe_psql('cell1', q{
CREATE TABLE dt (id bigint, region text, u text, PRIMARY KEY (region, id)) PARTITION BY LIST (region);
CREATE TABLE dt_1 PARTITION OF dt FOR VALUES IN ('x');
CREATE TABLE dt_2 PARTITION OF dt FOR VALUES IN ('y');
SELECT claims_cell.claim_column('dt', 'u', 'USERNAMES', 'USER', 'id');
INSERT INTO dt VALUES (1, 'x', 'dt-kept'), (2, 'y', 'dt-detached');
ALTER TABLE dt DETACH PARTITION dt_2;});
is(store_claims('dt-detached'), 'dt-detached:ACTIVE:1', 'after DETACH the detached rows\' values stay claimed');
$node->safe_psql('cell1', q{SET claims_cell.verify_recent = 0; SELECT claims_cell.verify('dt', true)});
is(store_claims('dt-detached'), 'dt-detached:ACTIVE:1',
	'and verify() of the parent does not release them (docs: DETACH is unclaim_column for the partition)');
($st) = sql_state($node, 'cell2', q{INSERT INTO users VALUES (2, 'dt-detached')});
is($st, '23505', 'so another cell cannot take a value the detached table still holds');

done_testing();
