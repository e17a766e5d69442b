# Both libraries build uuid7.c and bgw_database.c from one source; those
# functions must stay local to each library. PostgreSQL 15 loads libraries
# with RTLD_GLOBAL, so a backend that loaded both would otherwise call one
# library's copy from the other (a store updated apart from its cells runs
# the other version's code).
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;

my $libdir = `pg_config --pkglibdir`;
chomp $libdir;
for my $lib ('claims.so', 'claims_cell.so')
{
	my $path = "$libdir/$lib";
	ok(-f $path, "$lib is installed");
	my $symbols = `nm -D --defined-only $path`;
	is($?, 0, "nm reads the dynamic symbols of $lib");
	my @shared = grep { /\b(claims_uuid7_fill|claims_bgw_\w+)$/ } split /\n/, $symbols;
	is(join(', ', @shared), '', "$lib exports none of the functions both libraries share");
	like($symbols, qr/\bPg_magic_func$/m, "$lib still exports its magic block");
}

done_testing();
