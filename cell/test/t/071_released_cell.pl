# The released cells keep working against the new store: claims_cell 1.4,
# which matches the store's human text and knows nothing of the refusal
# contract's line (common/refusal.h), against the store of this tree, whose
# refusals end their DETAIL with that line.
#
# 1.4 as released is the tree of the parent of the first commit adding
# cell/src/sql/claims_cell--1.4--1.5.sql. The test finds that commit with
# git at run time in the source repository (CLAIMS_SOURCE_REPO, which
# scripts/test.sh sets, as its copy of the tree has no .git; else the
# source tree beside cell/), takes cell/, common/ and scripts/build_sql.sh
# of its parent with git archive, builds them and installs them into a
# private copy of the PostgreSQL installation, with the store built from
# this tree (CLAIMS_SOURCE_DIR, as 070_reworded_store.pl). Without that
# history (a tarball, a shallow clone that does not reach back to 1.4, no
# git) it skips the whole file, saying which it found.
use strict;
use warnings;

use Cwd ();
use File::Basename ();
use File::Compare ();
use File::Path ();
use FindBin;
use IPC::Run ();
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = Cwd::abs_path($ENV{CLAIMS_SOURCE_DIR} // "$FindBin::RealBin/../../..");
plan skip_all => "the store's source is not at $src (set CLAIMS_SOURCE_DIR)"
  unless -f "$src/src/reworded.c" && -f "$src/claims.control";
my $repo = $ENV{CLAIMS_SOURCE_REPO} // $src;
$repo = Cwd::abs_path($repo) // $repo;
# a tree without .git must not be taken for a repository above it
$ENV{GIT_CEILING_DIRECTORIES} = File::Basename::dirname($repo);
my $first_15 = 'cell/src/sql/claims_cell--1.4--1.5.sql';

# git in the repository, whoever owns it (the test runs as another user than
# the checkout's owner); returns its stdout, undef when it fails.
sub git
{
	my @args = @_;
	my ($out, $err) = ('', '');
	# eval: a system without git (a Debian root of another release) skips
	my $ok = eval {
		IPC::Run::run([ 'git', '-c', 'safe.directory=*', '-C', $repo, @args ],
			'<', \undef, '>', \$out, '2>', \$err);
	};
	return $ok ? $out : undef;
}

my $released;
{
	my $why;
	my $adds = git('log', '--reverse', '--diff-filter=A', '--format=%H', '--', $first_15);
	if (!defined $adds)
	{
		$why = "$repo is not a git repository git can read (set CLAIMS_SOURCE_REPO)";
	}
	elsif ($adds !~ /^([0-9a-f]{40})$/m)
	{
		$why = "the history in $repo has no commit adding $first_15";
	}
	else
	{
		my $adding = $1;
		my $parent = git('rev-parse', '--verify', '-q', "$adding^1^{commit}");
		chomp($parent) if defined $parent;
		my $tree14 = defined $parent ? git('ls-tree', '--name-only', $parent, 'cell/src/sql/') : undef;
		if (!defined $parent)
		{
			$why = "the history in $repo stops at $adding (a shallow clone?): "
			  . "the commit before claims_cell 1.5 is not in it";
		}
		elsif (!defined $tree14 || $tree14 !~ m{^cell/src/sql/claims_cell--1\.3--1\.4\.sql$}m)
		{
			$why = "the parent of $adding has no claims_cell 1.4";
		}
		else
		{
			$released = $parent;
		}
	}
	plan skip_all => "claims_cell 1.4 cannot be taken from git history: $why" unless defined $released;
}
note "claims_cell 1.4 as released: the tree of $released";

# One private installation: the store of this tree, then the released cell
# alone (the copy's cell files, of the cell installed from this tree, go
# first, so nothing of 1.5 can be picked up).
my $inst = private_installation('released_cell');
install_store($inst, $src, '');
my ($libdir, $extdir) = ("$inst->{destdir}$inst->{dirs}{pkglibdir}",
	"$inst->{destdir}$inst->{dirs}{sharedir}/extension");
unlink(glob("$extdir/claims_cell*"), "$libdir/claims_cell.so");
File::Path::rmtree("$libdir/bitcode/claims_cell");
unlink("$libdir/bitcode/claims_cell.index.bc");
my $tree14 = "$inst->{base}/claims_cell-1.4";
File::Path::make_path($tree14);
system("git -c safe.directory='*' -C '$repo' archive '$released' cell common scripts/build_sql.sh"
	  . " | tar -x -C '$tree14'") == 0
  or die "git archive of $released failed";
make_install($inst, "$tree14/cell", 'claims_cell 1.4');
ok(File::Compare::compare("$tree14/cell/claims_cell.so", "$libdir/claims_cell.so") == 0,
	'the private installation has the library of claims_cell 1.4');
ok(-f "$extdir/claims_cell--1.3--1.4.sql" && !-e "$extdir/claims_cell--1.4--1.5.sql",
	'and its scripts, up to 1.4');

my $store = store_node('store', { install_path => $inst->{install_path} },
	[ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]);
my $node = cell_node('cells', "claims_cell.verify_interval = 0\nclaims_cell.database = 'cell1'\n", install_path => $inst->{install_path});
for my $cell (1, 2)
{
	add_cell(node => $node, store => $store, db => "cell$cell", cell_id => $cell,
		role => $cell == 1 ? 'cell_one' : 'cell_two', version => '1.4', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}
is($node->safe_psql('cell1', q{SELECT extversion FROM pg_extension WHERE extname = 'claims_cell'}),
	'1.4', 'the cells run claims_cell 1.4');
is($node->safe_psql('cell1', q{SELECT setting FROM pg_config WHERE name = 'PKGLIBDIR'}),
	$libdir, 'the cell server loads its libraries from the private installation');

# cell 2 owns "taken"
$node->safe_psql('cell2', q{INSERT INTO users VALUES (1, 'taken')});

# The store is the new one: its refusals end with the contract's line.
{
	my ($st, $out, $err) = sql_state($store, 'postgres', q{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "taken"},
  "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "AQ=="}}]}')});
	is($st, '23505', 'the store refuses a create of another cell\'s value: 23505');
	like($err, qr/\{USERNAMES=taken\} is already claimed\n/, 'with the human text released cells match');
	like($err, qr/\nclaims-refusal\/1: taken USERNAMES=taken\n/, 'and the contract\'s line');
}

# Another lease holds "busy": cell 2's begin_update at the store, not committed.
$store->safe_psql('postgres', q{SET ROLE cell_two;
SELECT claims_begin_update(jsonb_build_object('cell_id', 2,
  'create_records', jsonb_build_array(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', 'busy'),
    'subject', jsonb_build_object('type', 'USER', 'id', 7),
    'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 'AAAAAAAAAAc=')))))});

sub stat_of
{
	my ($db, $column) = @_;
	return $node->safe_psql($db, "SELECT $column FROM claims_cell.stats WHERE scope = 'database'");
}

# The store's values: "value:cell ..." of the active claims.
sub store_values
{
	return $store->safe_psql('postgres', q{
SELECT string_agg(bucket_value || ':' || creator_id, ' ' ORDER BY bucket_value)
  FROM claims WHERE status = 'ACTIVE'});
}

# A value another cell owns: 23505, named as a unique violation.
{
	my $before = stat_of('cell1', 'conflicts_permanent');
	my ($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (2, 'fine'), (3, 'taken')});
	is($st, '23505', "a value another cell owns: 23505") or diag($err);
	like($err, qr/ERROR:  23505: value "taken" of column "username" of table "users" is already claimed by another cell\n/,
		'the message names the value, the column and the table');
	like($err, qr/\nDETAIL:  Key \(username\)=\(taken\) already exists in another cell: the claims store holds \{USERNAMES=taken\}\.\n/,
		'the detail reads like a unique violation');
	like($err, qr/\nSCHEMA NAME:  public\nTABLE NAME:  users\nCOLUMN NAME:  username\n/,
		'the error fields name the table and the column');
	unlike($err, qr/claims-refusal/, 'the contract\'s line does not show');
	is(stat_of('cell1', 'conflicts_permanent'), $before + 1, 'a permanent conflict counted');
	is($node->safe_psql('cell1', q{SELECT count(*) FROM users}), '0', 'cell 1 keeps nothing');
}

# A value under another lease: 55P03.
{
	my $before = stat_of('cell1', 'conflicts_temporary');
	my ($st, $out, $err) = sql_state($node, 'cell1', q{INSERT INTO users VALUES (4, 'busy')});
	is($st, '55P03', 'a value under another lease: 55P03') or diag($err);
	like($err, qr/ERROR:  55P03: value "busy" of column "username" of table "users" is under another lease at the claims store\n/,
		'the message names the value, the column and the table');
	# 1.4 quotes the store's DETAIL whole: its last line is now the contract's
	like($err, qr/\nDETAIL:  Key \(username\)=\(busy\) is being claimed or released by another transaction: [^\n]*\{USERNAMES=busy\}/,
		'the detail quotes the store\'s');
	like($err, qr/\nclaims-refusal\/1: leased USERNAMES=busy\nHINT:  Nothing was claimed; try again later\.\n/,
		'the quoted detail ends with the contract\'s line, before the hint');
	like($err, qr/\nTABLE NAME:  users\nCOLUMN NAME:  username\n/, 'the error fields name the table and the column');
	is(stat_of('cell1', 'conflicts_temporary'), $before + 1, 'a temporary conflict counted');
}

# Destroys the store refuses (another cell's value, a value nobody claims)
# are dropped with a WARNING each and counted, the rest of the lease taken.
$node->safe_psql('cell1', q{SET session_replication_role = replica;
INSERT INTO users VALUES (10, 'nobody'), (11, 'taken')});
for my $c ([ 10, 'nobody', 'a value nobody claims' ], [ 11, 'taken', "another cell's value" ])
{
	my ($id, $value, $what) = @$c;
	my $before = stat_of('cell1', 'unclaimed_destroys');
	my ($st, $out, $err) = sql_state($node, 'cell1', "DELETE FROM users WHERE id = $id");
	is($st, '00000', "a destroy of $what commits") or diag($err);
	like($err,
		qr/WARNING:  01000: claims_cell: value "$value" of column "username" of table "users" was not claimed at the claims store\n/,
		"a destroy of $what: a WARNING");
	is(stat_of('cell1', 'unclaimed_destroys'), $before + 1, "a destroy of $what counted");
}
is(store_values(), 'taken:2', "the store keeps cell 2's claim of taken, and no other");

# A rename commits: the store then holds the new value for cell 1, not the old.
$node->safe_psql('cell1', q{INSERT INTO users VALUES (20, 'alice')});
{
	my ($st, $out, $err) = sql_state($node, 'cell1', q{UPDATE users SET username = 'alicia' WHERE id = 20});
	is($st, '00000', 'a rename commits') or diag($err);
}
is(store_values(), 'alicia:1 taken:2', 'the store holds the new value for cell 1');

# Nothing stays leased: at the store only cell 2's lease of "busy" (taken by
# hand above) is outstanding; the cells' lease rows go.
is($store->safe_psql('postgres', q{
SELECT string_agg(creator_id::text, ' ')
  FROM claim_leases WHERE state = 'outstanding'}), '2',
	'at the store only the lease taken by hand is outstanding');
is($store->safe_psql('postgres', q{SELECT count(*) FROM claims WHERE status <> 'ACTIVE'}),
	'1', 'and only its value is not active');
for my $cell (1, 2)
{
	my $uuids = $node->safe_psql("cell$cell", q{SELECT string_agg(quote_literal(uuid), ',') FROM claims_cell.outstanding_leases});
	is($store->safe_psql('postgres', "SELECT count(*) FROM claim_leases WHERE uuid IN ($uuids) AND state = 'outstanding'"),
		'0', "cell $cell: the leases its rows name are finished at the store") if $uuids ne '';
}
# the worker (of cell1 only: 1.4's serves one database) deletes the rows of committed leases
ok($node->poll_query_until('cell1', q{SELECT count(*) = 0 FROM claims_cell.outstanding_leases}),
	'cell 1: the worker leaves no lease row');

$node->stop;
$store->stop;
done_testing();
