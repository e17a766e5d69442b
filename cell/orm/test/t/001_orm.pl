# The ORM suite: Debian's Django (python3-django + python3-psycopg2),
# SQLAlchemy (python3-sqlalchemy) and ActiveRecord (ruby-activerecord +
# ruby-pg) against two cells and a store, as an application uses them:
# which exception each SQLSTATE becomes, at the statement in immediate
# mode and at COMMIT in deferred mode, savepoint recovery, get_or_create /
# create_or_find_by, bulk_create / insert_all, flush (TRUNCATE), and a test
# database cloned from a cell refusing to claim.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../../../test/perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use IPC::Run ();
use Test::More;

my $dir = "$FindBin::RealBin/../..";
my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells');
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', sql => q{
CREATE TABLE users (id bigserial PRIMARY KEY, username text);
CREATE INDEX ON users (username);
CREATE TABLE keys (id bigserial PRIMARY KEY, fingerprint text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
SELECT claims_cell.claim_column('keys', 'fingerprint', 'SSH_KEY_FINGERPRINTS', 'USER', 'id',
         "deferrable" => true, initially_deferred => true);
});
}
$node->safe_psql('cell2', q{INSERT INTO users (username) VALUES ('taken'); INSERT INTO keys (fingerprint) VALUES ('ktaken')});

# Run one application; returns its "name=value" lines as a hash.
sub app
{
	my @cmd = @_;
	my ($out, $err) = ('', '');
	local $ENV{ORM_HOST} = $node->host;
	local $ENV{ORM_PORT} = $node->port;
	local $ENV{ORM_USER} = scalar getpwuid($<);
	my $ok = IPC::Run::run(\@cmd, '>', \$out, '2>', \$err, IPC::Run::timeout(300));
	diag("@cmd: $err") if !$ok || $err =~ /Traceback|Error/;
	my %r = map { /^([^=]+)=(.*)$/ ? ($1 => $2) : () } split /\n/, $out;
	return \%r;
}

sub store_has
{
	my ($value) = @_;
	return $store->safe_psql('postgres', qq{SELECT coalesce(string_agg(creator_id || ':' || status, ','), '')
  FROM claims WHERE bucket_value = '$value'});
}

# A database cloned from cell 1 (a test database), and values under an
# open transaction's lease in cell 2.
$node->safe_psql('postgres', 'CREATE DATABASE copy1 TEMPLATE cell1');
my $held = start_session($node, 'cell2',
	"BEGIN;\nINSERT INTO users (username) VALUES ('ar_held'), ('dj_held');\nSELECT 'held';\n");
$held->{h}->pump until $held->{out} =~ /held/;

# --- ActiveRecord
my $ar = app('ruby', "$dir/activerecord_app.rb");
is($ar->{held}, 'ActiveRecord::LockWaitTimeout/55P03', 'ActiveRecord: 55P03 is LockWaitTimeout');
is($ar->{copy}, 'ActiveRecord::StatementInvalid/55000', 'ActiveRecord: a cloned database: StatementInvalid 55000');
is($ar->{savepoint_error}, 'ActiveRecord::RecordNotUnique', 'ActiveRecord: 23505 is RecordNotUnique at the statement');
is($ar->{savepoint_kept}, '1', 'ActiveRecord: the savepoint recovered and the transaction committed');
is($ar->{create_or_find_by}, 'found existing', 'ActiveRecord: create_or_find_by finds the row holding the value');
is($ar->{create_or_find_by_other}, 'ActiveRecord::RecordNotFound/', 'ActiveRecord: of a value another cell holds, RecordNotFound');
like($ar->{insert_all}, qr{^ActiveRecord::RecordNotUnique/23505}, 'ActiveRecord: insert_all fails at its statement');
is($ar->{insert_all_kept}, '0', 'ActiveRecord: nothing of it kept');
like($ar->{deferred}, qr{^ActiveRecord::RecordNotUnique/23505}, 'ActiveRecord: a deferred column fails at COMMIT');
is(store_has('ar_after'), '1:ACTIVE', 'ActiveRecord: the store holds what committed');

# --- SQLAlchemy
my $sa = app('/usr/bin/python3', "$dir/sqlalchemy_app.py");
is($sa->{flush_error}, 'IntegrityError/23505', 'SQLAlchemy: IntegrityError at flush');
is($sa->{commit}, 'ok', 'SQLAlchemy: a nested transaction recovers');
is($sa->{deferred_flush}, 'ok', 'SQLAlchemy: deferred: flush succeeds');
is($sa->{deferred_commit}, 'IntegrityError/23505', 'SQLAlchemy: deferred: IntegrityError at commit');
is($sa->{held}, 'OperationalError/55P03', 'SQLAlchemy: 55P03 is OperationalError');
is(store_has('sa_after'), '1:ACTIVE', 'SQLAlchemy: the store holds what committed');

# --- Django
my $dj = app('/usr/bin/python3', "$dir/django_app.py");
is($dj->{held}, 'OperationalError/55P03', 'Django: 55P03 is OperationalError');
$held->{in} .= "ROLLBACK;\n\\q\n";
$held->{h}->finish;
is($dj->{savepoint_error}, 'IntegrityError/23505', 'Django: IntegrityError at the statement');
is($dj->{savepoint_commit}, 'none', 'Django: atomic() savepoint recovers');
is($dj->{savepoint_kept}, '1', 'Django: the rest is kept');
is($dj->{goc_immediate}, 'IntegrityError/23505', 'Django: get_or_create raises at the call');
is($dj->{goc_deferred}, 'IntegrityError/23505', 'Django: deferred: the atomic block fails at COMMIT');
is($dj->{goc_deferred_created}, '[True]', 'Django: deferred: get_or_create said created');
is($dj->{bulk_create}, 'IntegrityError/23505', 'Django: bulk_create fails at its statement');
is($dj->{bulk_kept}, '0', 'Django: nothing of it kept');
is($dj->{too_long}, 'DataError/22001', 'Django: 22001 is DataError');
like($dj->{race}, qr/^(IntegrityError|OperationalError),created$/, 'Django: a cross-cell get_or_create race has one winner');
is($dj->{flush_left}, '0', 'Django: flush (TRUNCATE) works on claimed tables');
is(store_has('dj_after'), '', 'Django: and releases the values');
is($dj->{copy}, 'OperationalError/55000', 'Django: a database cloned from a cell refuses to claim (55000)');

done_testing();
