# The cell reads the store's refusals through the contract (common/refusal.h),
# not the store's wording: against a store built with every message reworded
# (-DCLAIMS_REWORDED_MESSAGES) its SQLSTATEs, its own messages and its error
# fields are those it gives against the release build, store text it quotes
# excepted. Against a store that writes refusals as claims 1.2 did, without
# the contract's line (-DCLAIMS_LEGACY_REFUSALS), it falls back to that text
# and gives the same again. The test builds both store variants itself from
# the store's source beside cell/ into private installations.
use strict;
use warnings;

use Cwd ();
use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = Cwd::abs_path($ENV{CLAIMS_SOURCE_DIR} // "$FindBin::RealBin/../../..");
plan skip_all => "the store's source is not at $src (set CLAIMS_SOURCE_DIR)"
  unless -f "$src/src/reworded.c" && -f "$src/claims.control";

# A private installation with the store built with copt in it; returns
# its install_path (the directory holding bin/).
sub private_store
{
	my ($variant, $copt) = @_;
	my $inst = private_installation("store_$variant");
	install_store($inst, $src, $copt);
	return $inst->{install_path};
}

my %stores = (
	release => store_node('store_release', [ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]),
	reworded => store_node('store_reworded',
		{ install_path => private_store('reworded', '-DCLAIMS_REWORDED_MESSAGES') },
		[ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]),
	legacy => store_node('store_legacy',
		{ install_path => private_store('legacy', '-DCLAIMS_LEGACY_REFUSALS') },
		[ 1, 'cell-one', 'cell_one' ], [ 2, 'cell-two', 'cell_two' ]),
);
my @variants = qw(release reworded legacy);

my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
for my $v (@variants)
{
	add_cell(node => $node, store => $stores{$v}, db => "c_$v", cell_id => 1, role => 'cell_one', sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
});
}

# Cell 2 takes value at the store; committed unless $open (its lease stays outstanding).
sub cell_two_takes
{
	my ($store, $value, $open) = @_;
	my $begin = qq{claims_begin_update(jsonb_build_object('cell_id', 2,
  'create_records', jsonb_build_array(jsonb_build_object(
    'bucket', jsonb_build_object('type', 'USERNAMES', 'value', '$value'),
    'subject', jsonb_build_object('type', 'USER', 'id', 7),
    'source', jsonb_build_object('type', 'RAILS_TABLE_USERS', 'rails_primary_key_id', 'AAAAAAAAAAc=')))))};
	$store->safe_psql('postgres', "SET ROLE cell_two; SELECT "
		  . ($open ? $begin : "claims_commit(2, ($begin->>'lease_uuid')::uuid)"));
	return;
}
for my $v (@variants)
{
	cell_two_takes($stores{$v}, 'taken');
	cell_two_takes($stores{$v}, 'theirs');
	cell_two_takes($stores{$v}, 'busy', 1);
}

# The variants really differ: the reworded store's wording, the legacy store's missing line.
{
	my %said;
	for my $v (@variants)
	{
		my ($st, $out, $err) = sql_state($stores{$v}, 'postgres', q{
SET ROLE cell_one;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "taken"},
  "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": "AQ=="}}]}')});
		is($st, '23505', "$v store: a create of another cell's value is 23505");
		$said{$v} = $err;
	}
	like($said{release}, qr/ERROR:  23505: \{USERNAMES=taken\} is already claimed\n/, 'release store: the wording of 1.2');
	like($said{release}, qr/\nclaims-refusal\/1: taken USERNAMES=taken\n/, 'release store: the contract line');
	unlike($said{reworded}, qr/is already claimed\n|\{USERNAMES=/, 'reworded store: no wording of the release survives');
	like($said{reworded}, qr/\nclaims-refusal\/1: taken USERNAMES=taken\n/, 'reworded store: the same contract line');
	like($said{legacy}, qr/\{USERNAMES=taken\} is already claimed\n/, 'legacy store: the wording of 1.2');
	unlike($said{legacy}, qr/claims-refusal/, 'legacy store: no contract line');
}

# What the cell says for sql: its SQLSTATE and verbose error, with the store
# text it quotes replaced, and its WARNINGs.
sub cell_says
{
	my ($v, $sql) = @_;
	my ($st, $out, $err) = sql_state($node, "c_$v", $sql);
	$err =~ s/^psql:<stdin>:\d+: //mg;
	unlike($err, qr/claims-refusal/, "$v: the cell quotes no contract line");
	$err =~ s/(is being claimed or released by another transaction: ).*/$1<store text>/;
	$err =~ s/^(ERROR:  \w+: the claims store refused [^:]*: ).*/$1<store text>/m;
	return "$st\n$err";
}

my @cases = (
	[ 'another cell owns the value: 23505', '23505',
		q{INSERT INTO users VALUES (1, 'fine'), (2, 'taken')} ],
	[ 'another lease holds the value: 55P03', '55P03',
		q{INSERT INTO users VALUES (3, 'busy')} ],
	[ 'a destroy of a value nobody claims is dropped', '00000', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (10, 'nobody');
RESET session_replication_role;
DELETE FROM users WHERE id = 10} ],
	[ "a destroy of another cell's value is dropped", '00000', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (11, 'theirs');
RESET session_replication_role;
DELETE FROM users WHERE id = 11} ],
	[ 'a replace of a value nobody claims becomes a create', '00000', q{
SET session_replication_role = replica;
INSERT INTO users VALUES (12, 'ghost');
RESET session_replication_role;
UPDATE users SET username = 'ghost2' WHERE id = 12} ],
	[ 'a batch with a taken and a leased value: 23505 for the taken one', '23505',
		q{INSERT INTO users VALUES (13, 'busy'), (14, 'taken')} ],
);

for my $c (@cases)
{
	my ($name, $want, $sql) = @$c;
	my %said = map { $_ => cell_says($_, $sql) } @variants;
	like($said{release}, qr/^$want\n/, "release store: $name") or diag($said{release});
	is($said{reworded}, $said{release}, "reworded store: $name, the same error") or diag($said{release});
	is($said{legacy}, $said{release}, "claims 1.2's text: $name, the same error") or diag($said{release});
}

# The store refuses to act for the cell (a mapping of another role): 42501.
for my $v (@variants)
{
	$node->safe_psql("c_$v", q{ALTER USER MAPPING FOR PUBLIC SERVER topology OPTIONS (SET user 'cell_two')});
}
{
	my $sql = q{INSERT INTO users VALUES (20, 'wrong-role')};
	my %said = map { $_ => cell_says($_, $sql) } @variants;
	like($said{release}, qr/^42501\nERROR:  42501: the claims store refused to act for cell 1: /,
		'release store: a mapping of another role is 42501') or diag($said{release});
	is($said{reworded}, $said{release}, 'reworded store: the same 42501');
	is($said{legacy}, $said{release}, "claims 1.2's text: the same 42501");
}
for my $v (@variants)
{
	$node->safe_psql("c_$v", q{ALTER USER MAPPING FOR PUBLIC SERVER topology OPTIONS (SET user 'cell_one')});
}

# A lease larger than the store's claims.max_batch_size: 54000.
for my $v (@variants)
{
	$stores{$v}->safe_psql('postgres', q{ALTER SYSTEM SET claims.max_batch_size = 1; SELECT pg_reload_conf()});
}
{
	my $sql = q{INSERT INTO users VALUES (30, 'big1'), (31, 'big2')};
	my %said;
	for my $v (@variants)
	{
		$said{$v} = cell_says($v, $sql);
	}
	like($said{release}, qr/^54000\n/, 'release store: a batch over the store\'s limit is 54000')
	  or diag($said{release});
	is($said{reworded}, $said{release}, 'reworded store: the same 54000');
	is($said{legacy}, $said{release}, "claims 1.2's text: the same 54000");
}

$node->stop;
$stores{$_}->stop for @variants;
done_testing();
