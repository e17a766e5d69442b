# A statement that ends inside a TRUNCATE (DML run by another table's
# BEFORE TRUNCATE trigger) used to claim the releases the TRUNCATE's
# collect_truncate triggers collected so far, while the truncated table's
# rows are still there and not excluded (cell_truncating unset): the
# released value was kept claimed for a row the TRUNCATE then removed. Such
# a statement's claims now wait for the end of the TRUNCATE.
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
CREATE TABLE audit (id bigint);
CREATE FUNCTION audit_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO orgs VALUES (100, 'o-audit'); RETURN NULL; END $$;
CREATE TRIGGER audit_truncated BEFORE TRUNCATE ON audit FOR EACH STATEMENT EXECUTE FUNCTION audit_truncated();
});

sub claims_of
{
	my ($like) = @_;
	return $store->safe_psql('postgres', qq{
SELECT coalesce(string_agg(bucket_value || ':' || status || ':' || subject_id, ',' ORDER BY bucket_value), '')
  FROM claims WHERE bucket_value LIKE '$like'});
}

$node->safe_psql('cell1', q{INSERT INTO users VALUES (1, 'u-one')});
is(claims_of('u-%'), 'u-one:ACTIVE:1', 'claimed');
$node->safe_psql('cell1', q{TRUNCATE users, audit});
is($node->safe_psql('cell1', 'SELECT count(*) FROM users'), '0', 'users is empty');
is(claims_of('o-%'), 'o-audit:ACTIVE:100', 'the trigger\'s insert is claimed');
is(claims_of('u-%'), '', 'TRUNCATE released the value of the row it removed');

done_testing();
