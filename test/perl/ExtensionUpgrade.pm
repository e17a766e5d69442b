# ExtensionUpgrade: compare an extension updated in place with a fresh
# install, for the upgrade tests of both extensions.
#
# The image of a database is its `pg_dump --binary-upgrade --schema-only`:
# in that mode pg_dump writes every member object of an extension (tables,
# columns, defaults, constraints, indexes, triggers, functions, views,
# types, comments, privileges, initial privileges) instead of a bare
# CREATE EXTENSION, which is exactly what "identical to a fresh install"
# means. Lines that carry OIDs (binary_upgrade_set_next_*, the empty
# extension's creation with its extconfig OIDs, the relfrozenxid updates)
# or sequence positions are left out; the registrations of
# pg_extension_config_dump are compared by name instead.
package ExtensionUpgrade;

use strict;
use warnings;

use Exporter 'import';
use PostgreSQL::Test::Utils;
use Test::More;

our @EXPORT = qw(database_image extension_registration member_tables table_rows
  same_text versions_from);

# The normalised schema image of a database.
sub database_image
{
	my ($node, $db) = @_;
	my ($out, $err) = run_command([
		'pg_dump', '--binary-upgrade', '--schema-only',
		'-h', $node->host, '-p', $node->port, '-d', $db ]);
	die "pg_dump of $db failed: $err" if $? != 0;
	# OIDs, frozen xids and sequence positions are state, not definitions
	my @lines = grep {
		!/binary_upgrade_set_next_|binary_upgrade_create_empty_extension|^-- Dumped (from|by)|^\\(un)?restrict /
		  && !/relfrozenxid = |^WHERE oid = '\d+';|^SELECT pg_catalog\.setval\(/
	} split /\n/, $out;
	return join("\n", @lines) . "\n";
}

# pg_extension's row of ext, config tables by name: version, schema,
# relocatable, owner, extconfig and extcondition.
sub extension_registration
{
	my ($node, $db, $ext) = @_;
	return $node->safe_psql($db, qq{
SELECT e.extversion, e.extnamespace::regnamespace, e.extrelocatable, e.extowner::regrole,
       (SELECT string_agg(c::regclass::text || ' WHERE ' || coalesce(w, ''), '; ' ORDER BY c::regclass::text)
          FROM unnest(e.extconfig, e.extcondition) AS u(c, w))
  FROM pg_extension e WHERE e.extname = '$ext'});
}

# The member tables of ext with their columns: [ [table, "col, col"], ... ].
sub member_tables
{
	my ($node, $db, $ext) = @_;
	my $out = $node->safe_psql($db, qq{
SELECT c.oid::regclass, string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum)
  FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
  JOIN pg_class c ON c.oid = d.objid AND d.classid = 'pg_class'::regclass
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND e.extname = '$ext' AND c.relkind IN ('r', 'p')
 GROUP BY c.oid ORDER BY 1});
	return [ map { [ split /\|/, $_, 2 ] } grep { $_ ne '' } split /\n/, $out ];
}

# Every row of the given columns of a table, sorted, as text.
sub table_rows
{
	my ($node, $db, $table, $cols) = @_;
	return $node->safe_psql($db,
		"SELECT coalesce(string_agg(r::text, E'\\n' ORDER BY r::text), '') FROM (SELECT $cols FROM $table) r");
}

# is() for long texts: on a difference, the lines only one side has.
sub same_text
{
	my ($got, $want, $name) = @_;
	my $ok = is($got eq $want ? 1 : 0, 1, $name);
	if (!$ok)
	{
		my %w = map { $_ => 1 } split /\n/, $want;
		my %g = map { $_ => 1 } split /\n/, $got;
		diag("only in the first: $_") for grep { !$w{$_} } split /\n/, $got;
		diag("only in the second: $_") for grep { !$g{$_} } split /\n/, $want;
	}
	return $ok;
}

# The versions of ext from its scripts, oldest first, up to the control
# file's default_version: the first release and every update step.
sub versions_from
{
	my ($node, $ext) = @_;
	my $v = $node->safe_psql('postgres', qq{
WITH a AS (SELECT default_version::text AS dv FROM pg_available_extensions WHERE name = '$ext'),
     f AS (SELECT version AS first FROM pg_available_extension_versions WHERE name = '$ext'
            ORDER BY string_to_array(version, '.')::int[] LIMIT 1)
SELECT f.first || coalesce(' ' || (
         SELECT string_agg(p.target, ' ' ORDER BY string_to_array(p.target, '.')::int[])
           FROM pg_extension_update_paths('$ext') p
          WHERE p.source = f.first AND p.path IS NOT NULL
            AND string_to_array(p.target, '.')::int[] <= string_to_array(a.dv, '.')::int[]), '')
  FROM a, f});
	return split / /, $v;
}

1;
