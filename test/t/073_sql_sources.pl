# The extensions' scripts are built from their sources (scripts/build_sql.sh):
# templates in src/sql and cell/src/sql, each function's definitions in
# udfs/NAME/VERSION.sql with udfs/NAME/latest.sql naming the newest; an
# overloaded name has a directory per form, NAME.TYPES (udfs/claims_commit.jsonb
# holds claims_commit(jsonb)). This checks that layout: no function is
# defined outside udfs/, each definition is used once by the script of its
# version, every file of a directory defines its function (of the
# directory's argument types, for a NAME.TYPES directory), latest.sql is the
# newest, and the released scripts rebuild byte for byte (released.sha256),
# so that a change to a released definition cannot slip into an update path;
# and every function the catalog snapshot of the regress tests lists
# (expected/16_catalog.out, cell/expected/11_catalog.out) has its own
# directory.
use strict;
use warnings;

use Digest::SHA;
use File::Temp qw(tempdir);
use FindBin;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = "$FindBin::RealBin/../..";
sub slurp { my ($f) = @_; open my $fh, '<', $f or die "$f: $!"; local $/; return <$fh>; }

# 1.4-2 sorts after 1.4 and before 1.10.
sub version_key
{
	my ($f) = @_;
	my ($v, $k) = $f =~ /^([\d.]+?)(?:-(\d+))?\.sql$/ or return undef;
	return join('.', map { sprintf '%05d', $_ } split(/\./, $v), $k // 1);
}

# The argument types of the function NAME a definition creates, joined by
# "_" as a NAME.TYPES directory names them: "bigint_uuid" for
# claims_commit(cell_id bigint, lease_uuid uuid). OUT arguments and defaults
# are no part of a function's identity.
sub argument_types
{
	my ($text, $fname) = @_;
	my ($args) = $text =~ /^CREATE (?:OR REPLACE )?FUNCTION [^\s(]*\b\Q$fname\E\(((?:[^()]++|\((?1)\))*)\)/mi
	  or return undef;
	my @types;
	for my $arg (split /,/, $args)
	{
		$arg =~ s/\s+(?:DEFAULT\b|=).*//si;
		$arg =~ s/^\s+|\s+$//g;
		next if $arg =~ /^OUT\s/i;
		$arg =~ s/^(?:IN|INOUT|VARIADIC)\s+//i;
		my @words = $arg =~ /("[^"]+"|\S+)/g;
		shift @words if @words > 1;    # the argument's name
		push @types, join('', @words);
	}
	return join('_', @types);
}

# The version a script brings the extension to: claims--1.1--1.2.sql is 1.2.
sub script_version { my ($f) = @_; return $f =~ /--(?:[\d.]+--)?([\d.]+)\.sql$/ ? $1 : undef; }

my $tmp = tempdir(CLEANUP => 1);
for my $ext ([ 'claims', "$root/src/sql", "$root/claims.control", "$root/expected/16_catalog.out" ],
	[ 'claims_cell', "$root/cell/src/sql", "$root/cell/claims_cell.control", "$root/cell/expected/11_catalog.out" ])
{
	my ($name, $dir, $control, $catalog) = @$ext;
	my @templates = map { s{.*/}{}r } sort glob("$dir/$name--*.sql");
	cmp_ok(scalar @templates, '>=', 2, "$name: scripts have templates: @templates");
	my ($default) = slurp($control) =~ /^default_version = '([^']+)'/m;
	ok((grep { script_version($_) eq $default } @templates),
		"$name: a template brings it to its default version $default");

	# Where each definition file is used.
	my %used;
	for my $t (@templates)
	{
		my $text = slurp("$dir/$t");
		is(scalar(() = $text =~ /^CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE)\b/mig), 0,
			"$name: $t defines no function itself (they live in udfs/)");
		for my $inc ($text =~ /^#include "([^"]+)"$/mg)
		{
			push @{ $used{$inc} }, $t;
			my ($v) = $inc =~ m{^udfs/[^/]+/([\d.]+?)(?:-\d+)?\.sql$};
			is($v, script_version($t), "$name: $t includes $inc of its own version");
		}
	}

	for my $udf (map { s{.*/}{}r } sort glob("$dir/udfs/*"))
	{
		my @files = map { s{.*/}{}r } glob("$dir/udfs/$udf/*.sql");
		my @versions = sort { version_key($a) cmp version_key($b) }
		  grep { $_ ne 'latest.sql' } @files;
		my $latest = "$dir/udfs/$udf/latest.sql";
		ok(-l $latest, "$name: udfs/$udf/latest.sql is a link");
		is(readlink($latest), $versions[-1], "$name: udfs/$udf/latest.sql names its newest definition");
		for my $f (@versions)
		{
			ok(defined version_key($f), "$name: udfs/$udf/$f is named by its version");
			is(scalar @{ $used{"udfs/$udf/$f"} // [] }, 1,
				"$name: udfs/$udf/$f is used by exactly one script");
			my ($fname, $tag) = $udf =~ /^([^.]+)(?:\.(.+))?$/;
			my $text = slurp("$dir/udfs/$udf/$f");
			like($text, qr/^CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE) [^\s(]*\b\Q$fname\E\(/mi,
				"$name: udfs/$udf/$f defines $fname");
			is(argument_types($text, $fname), $tag, "$name: udfs/$udf/$f defines $fname($tag)")
			  if defined $tag;
		}
	}

	# Every function of the extension (its catalog snapshot lists the
	# members) has a directory of its own: NAME, or NAME.TYPES where the
	# name is overloaded.
	my %dirs = map { s{.*/}{}r => 1 } glob("$dir/udfs/*");
	my @functions = slurp($catalog) =~ /^ function (?:\w+\.)?(\w+)\(([^)]*)\)$/mg;
	my %overloads;
	for (my $i = 0; $i < @functions; $i += 2) { $overloads{ $functions[$i] }++; }
	my %homes;
	for (my $i = 0; $i < @functions; $i += 2)
	{
		my ($fname, $types) = @functions[ $i, $i + 1 ];
		my $home = $overloads{$fname} > 1 ? "$fname." . join('_', map { s/\s+//gr } split /,/, $types) : $fname;
		ok($dirs{$home}, "$name: function $fname($types) has its directory udfs/$home");
		$homes{$home} = 1;
	}
	is(join(' ', grep { !$homes{$_} } sort keys %dirs), '',
		"$name: every directory in udfs/ is the home of one function of the catalog snapshot");

	# Released scripts rebuild exactly.
	my @released = map { [ split /\s+/ ] } grep { /\S/ } split /\n/, slurp("$dir/released.sha256");
	cmp_ok(scalar @released, '>=', 1, "$name: released scripts are recorded");
	for my $r (@released)
	{
		my ($sum, $file) = @$r;
		my ($rc) = system("$root/scripts/build_sql.sh", "$dir/$file", "$tmp/$file");
		is($rc, 0, "$name: $file builds");
		is(Digest::SHA->new(256)->addfile("$tmp/$file")->hexdigest, $sum,
			"$name: released $file is rebuilt byte for byte");
	}
}

done_testing();
