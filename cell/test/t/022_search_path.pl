# A database owner plants look-alike operators and functions in public; a
# superuser then runs every administrator function of claims_cell, with the
# default search path and with public ahead of pg_catalog. None of the
# planted objects may run (the extension pins its search path or
# schema-qualifies every name), and the owner never becomes a superuser.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";
use CellNodes;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $store = store_node('store', [ 1, 'cell-one', 'cell_one' ]);
my $node = cell_node('cell', "claims_cell.verify_interval = 0\n");
$node->safe_psql('postgres', 'CREATE ROLE mallory LOGIN');
add_cell(node => $node, store => $store, db => 'cell1', cell_id => 1, role => 'cell_one',
	create_options => 'OWNER mallory',
	sql => q{
CREATE TABLE users (id bigint PRIMARY KEY, username text, email text);
SELECT claims_cell.claim_column('users', 'username', 'USERNAMES', 'USER', 'id');
CREATE TABLE gone (id bigint PRIMARY KEY, email text);
SELECT claims_cell.claim_column('gone', 'email', 'ROUTES', 'USER', 'id', 'RAILS_TABLE_USERS');
INSERT INTO users VALUES (1, 'alice', 'alice@example.com');
});

# The owner of public plants operators for argument types pg_catalog has no
# exact operator of, and functions shadowing variadic or polymorphic ones.
my $plant = q{
CREATE TABLE public.planted_calls (who name, what text);
GRANT ALL ON public.planted_calls TO PUBLIC;
CREATE FUNCTION public.planted(what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.planted_calls VALUES (current_user, what);
  IF pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.=) 'on' THEN
    EXECUTE 'ALTER ROLE mallory SUPERUSER';
  END IF;
  RETURN true;
END $$;
};
my @ops = (
	[ 'regclass', 'regclass' ], [ 'regclass', 'oid' ], [ 'oid', 'regclass' ],
	[ 'regtype', 'regtype' ], [ 'regproc', 'regproc' ], [ 'name', 'regclass' ],
	[ 'smallint', 'integer' ], [ 'integer', 'smallint' ], [ 'uuid', 'text' ],
	[ 'text', 'uuid' ], [ 'jsonb', 'text' ], [ 'bytea', 'text' ]);
my $n = 0;
for my $op (@ops)
{
	my ($l, $r) = @$op;
	for my $name ('=', '<>', '<', '>', '<=', '>=')
	{
		$n++;
		$plant .= qq{
CREATE FUNCTION public.planted_op$n($l, $r) RETURNS boolean LANGUAGE sql
  AS \$\$ SELECT public.planted('$l $name $r') \$\$;
CREATE OPERATOR public.$name (LEFTARG = $l, RIGHTARG = $r, FUNCTION = public.planted_op$n);
};
	}
}
for my $f ('jsonb_build_object(text, bigint)', 'jsonb_build_object(text, text)',
	'jsonb_build_object(text, bigint, text, integer)', 'format(text, text)',
	'format(text, regclass)', 'format(text, text, text)', 'concat_ws(text, text, text, text)',
	'concat(text, text, text)', 'coalesce(text, text)', 'hashtext(text)', 'now()',
	'clock_timestamp()', 'to_char(timestamp, text)', 'count(bigint)', 'quote_ident(name)')
{
	my ($fname) = $f =~ /^(\w+)/;
	my $ret = $f =~ /^(now|clock_timestamp)/ ? 'timestamptz' : $f =~ /^(hashtext|count)/ ? 'integer'
	  : $f =~ /^jsonb/ ? 'jsonb' : 'text';
	next if $fname eq 'coalesce' || $fname eq 'count';    # not functions one may shadow so
	$plant .= qq{
CREATE FUNCTION public.$f RETURNS $ret LANGUAGE plpgsql AS \$\$
BEGIN PERFORM public.planted('$f'); RETURN NULL; END \$\$;
};
}
my ($st, $out, $err) = sql_state($node, 'cell1', "SET ROLE mallory;\n$plant");
is($st, '00000', 'the database owner plants look-alikes in public') or diag($err);

# Every administrator function, each in its own transaction (ROUND: 1, 2).
my @calls = (
	q{SELECT claims_cell.configure('topology', 1)},
	q{SELECT claims_cell.claim_column('users', 'email', 'EMAILS', 'USER', 'id')},
	q{SELECT claims_cell.set_claiming('users', 'email', false)},
	q{SELECT claims_cell.set_claiming('users', 'email', true)},
	q{INSERT INTO users VALUES (ROUND + 1, 'bobROUND', 'bobROUND@example.com')},
	q{UPDATE users SET username = 'bobbyROUND' WHERE id = ROUND + 1},
	q{SELECT * FROM claims_cell.verify('users')},
	q{SELECT * FROM claims_cell.verify('users', repair => true)},
	q{SELECT * FROM claims_cell.reconcile()},
	q{SELECT * FROM claims_cell.reconcile(full_scan => true)},
	q{SELECT * FROM claims_cell.verify_due()},
	q{SELECT * FROM claims_cell.stats},
	q{SELECT * FROM claims_cell.stats()},
	q{SELECT claims_cell.unclaim_column('users', 'email')},
	q{DELETE FROM users WHERE id = ROUND + 1},
	q{DROP TABLE gone},
);
my $round = 0;
for my $path ('"$user", public', 'public, pg_catalog')
{
	$round++;
	for my $call (map { s/ROUND/$round/gr } @calls)
	{
		($st, $out, $err) = sql_state($node, 'cell1', qq{SET search_path = $path;\n$call});
		# a second round finds the column unclaimed and the table dropped
		$st = '00000' if $st ne '00000' && $err =~ /is not claimed|does not exist/;
		is($st, '00000', "as superuser with search_path $path: $call") or diag($err);
	}
}
is($node->safe_psql('cell1', q{SELECT coalesce(string_agg(who || ': ' || what, '; '), '') FROM public.planted_calls}),
	'', 'no planted operator or function ever ran');
is($node->safe_psql('postgres', q{SELECT rolsuper FROM pg_roles WHERE rolname = 'mallory'}),
	'f', 'the database owner did not become a superuser');

done_testing();
