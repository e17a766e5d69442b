# claims.open_mode: off by default; when an operator turns it on in the
# server configuration and reloads, the cell checks are lifted (any role
# that may call the functions acts for any cell id, registered or not);
# turning it off again restores them. Function privileges still apply.
use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('open_mode');
$node->init(allows_streaming => 0);
$node->start;

$node->safe_psql('postgres', <<'EOS');
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
CREATE ROLE cell_two LOGIN;
CREATE ROLE outsider LOGIN;
SELECT claims_register_cell(1, 'cell one', 'cell_one');
SELECT claims_register_cell(2, 'cell two', 'cell_two');
EOS

sub begin_sql
{
	my ($cell, $value) = @_;
	return "\\set VERBOSITY verbose\n"
	  . "SELECT claims_begin_update('{\"cell_id\": $cell, \"create_records\": [{\"claim\": {\"username\": \"$value\"},"
	  . " \"subject\": {\"type\": \"USER\", \"id\": 1},"
	  . " \"source\": {\"type\": \"RAILS_TABLE_USERS\", \"rails_primary_key_id\": 1}}]}') ->> 'cell_id';";
}

# Run SQL as a role in a new session; returns "ok:<stdout>" or the SQLSTATE.
sub try_as
{
	my ($user, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql,
		extra_params => [ '-U', $user ], on_error_stop => 1);
	return "ok:$stdout" if $ret == 0;
	return $stderr =~ /ERROR:\s+([0-9A-Z]{5}):/ ? $1 : "failed: $stderr";
}

sub set_open_mode
{
	my ($value) = @_;
	$node->append_conf('postgresql.conf', "claims.open_mode = $value\n");
	$node->reload;
	$node->poll_query_until('postgres', 'SHOW claims.open_mode', $value)
	  or BAIL_OUT("claims.open_mode did not become $value");
	return;
}

is($node->safe_psql('postgres', 'SHOW claims.open_mode'), 'off', 'claims.open_mode is off by default');
is(try_as('cell_one', "\\set VERBOSITY verbose\nSET claims.open_mode = on;"), '55P02',
	'a session cannot turn open mode on');
is(try_as('cell_one', begin_sql(2, 'closed-2')), '42501', 'off: cell_one is refused for cell 2');
is(try_as('cell_one', begin_sql(7, 'closed-7')), '42501', 'off: unregistered cell 7 is refused');

set_open_mode('on');
is(try_as('cell_one', begin_sql(2, 'open-2')), 'ok:2', 'on: cell_one may act for cell 2');
is(try_as('cell_one', begin_sql(7, 'open-7')), 'ok:7', 'on: unregistered cell 7 is accepted');
is(try_as('outsider', begin_sql(1, 'open-outsider')), '42501',
	'on: a role without EXECUTE on the functions is still refused');
is(try_as('outsider', "\\set VERBOSITY verbose\nSELECT claims_get_record('{\"claim\": {\"username\": \"open-2\"}}') IS NULL;"),
	'42501', 'on: ... for lookups too');

set_open_mode('off');
is(try_as('cell_one', begin_sql(2, 'closed-again')), '42501', 'off again: cell_one is refused for cell 2');
is(try_as('cell_two', "\\set VERBOSITY verbose\nSELECT claims_list_leases('{\"cell_id\": 2}') -> 'leases' ->> 0 IS NOT NULL;"),
	'ok:t', 'off again: cell 2 sees the lease taken for it in open mode');

$node->stop;
done_testing();
