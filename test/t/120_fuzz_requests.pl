
# Hostile input: a seeded fuzzer mutates valid requests (wrong types, missing
# and unknown fields, huge and empty values, invalid base64 and UUIDs,
# numbers out of range, deep nesting, odd Unicode, NUL escapes, camelCase
# and snake_case mixes, broken JSON text) and sends them to every function:
# claims_begin_update, claims_commit, claims_rollback, claims_get_record,
# claims_list_leases and claims_list_records. Every call must succeed or
# fail with a documented SQLSTATE; the server must never crash, and
# claims_check() must stay empty.
#
# Requests go in batches through one psql session: a temporary plpgsql
# function runs each in its own subtransaction and returns 'ok' or the
# SQLSTATE, so ten thousand requests take seconds.
#
# Environment: CLAIMS_SEED (replay), CLAIMS_FUZZ_REQUESTS (default 10000),
# CLAIMS_FUZZ_BATCH (default 100).
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use List::Util qw(shuffle);
use MIME::Base64 qw(encode_base64);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $seed = claims_seed();
my $total = env_int('CLAIMS_FUZZ_REQUESTS', 10000);
my $batch = env_int('CLAIMS_FUZZ_BATCH', 100);
my $t0 = time();

# Documented answers: the store's own errors, and PostgreSQL's input errors
# for jsonb and uuid text (22P02 invalid syntax, 22P05 \u0000).
my %documented = map { $_ => 1 }
  qw(22023 22004 54000 23505 55P03 P0002 42501 55000 22P02 22P05);

my $node = new_claims_node('fuzz', conf => "claims.max_batch_size = 200\n");
my $log_start = -s $node->logfile;

my $s = ClaimsFault::Session->new($node->connstr('postgres'), timeout => 300);
$s->connect or BAIL_OUT('cannot connect');
my $r = $s->query(<<'EOS');
SET statement_timeout = '60s';
CREATE FUNCTION pg_temp.try(q text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
    result text;
BEGIN
    EXECUTE q INTO result;
    RETURN 'ok|' || coalesce(pg_catalog.left(pg_catalog.replace(result, E'\n', ' '), 2000), 'NULL');
EXCEPTION WHEN OTHERS THEN
    RETURN pg_catalog.format('%s|%s', SQLSTATE, pg_catalog.replace(pg_catalog.left(SQLERRM, 300), E'\n', ' '));
END
$f$;
EOS
is($r->{sqlstate}, '00000', 'wrapper function created') or diag($r->{err});

# ---------------------------------------------------------------------------
# JSON text with full control: Raw values are written verbatim (numbers
# like 1e400, escapes like \u0000), hashes may carry duplicate keys.
package Raw { sub new { my ($c, $t) = @_; return bless \$t, $c; } }
package Dup { sub new { my ($c, @pairs) = @_; return bless [@pairs], $c; } }
package main;

sub jstr
{
	my ($s) = @_;
	$s =~ s/(["\\])/\\$1/g;
	$s =~ s/([\x00-\x1f])/sprintf('\\u%04x', ord($1))/ge;
	return "\"$s\"";
}

sub jtext
{
	my ($x) = @_;
	return 'null' unless defined $x;
	my $r = ref $x;
	return $$x if $r eq 'Raw';
	return ($$x ? 'true' : 'false') if $r eq 'SCALAR';
	if ($r eq 'Dup')
	{
		my @p = @$x;
		my @out;
		push @out, jstr(shift @p) . ':' . jtext(shift @p) while @p;
		return '{' . join(',', @out) . '}';
	}
	return '{' . join(',', map { jstr($_) . ':' . jtext($x->{$_}) } sort keys %$x) . '}'
	  if $r eq 'HASH';
	return '[' . join(',', map { jtext($_) } @$x) . ']' if $r eq 'ARRAY';
	return jstr($x);
}
# A JSON number (plain Perl scalars are written as strings).
sub num { return Raw->new("$_[0]"); }

sub one_of { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }

# ---------------------------------------------------------------------------
# Valid requests.
my @types = qw(USERNAMES EMAILS ROUTES PROJECT_IDS PAGES_DOMAINS SSH_KEYS USER_IDS);
my %claim_field = (USERNAMES => 'username', EMAILS => 'email', ROUTES => 'route',
	PROJECT_IDS => 'project_id', PAGES_DOMAINS => 'pages_domain', SSH_KEYS => 'ssh_key',
	USER_IDS => 'user_id');
my %int_type = (PROJECT_IDS => 1, USER_IDS => 1);
my @leases;         # [cell, uuid] of granted leases
my @tokens;         # next tokens seen

sub value_for
{
	my ($type) = @_;
	return '' . (1 + int(rand(40))) if $int_type{$type};
	my $v = one_of('fz', 'fuzz', "\x{fc}ber", "\x{1F600}", 'a.b', 'x' x 3, "\x{5f71}\x{6b66}");
	return lc($type) . '-' . $v . int(rand(15)) . ($type eq 'EMAILS' ? '@fuzz.test' : '');
}

sub valid_metadata
{
	my ($create) = @_;
	my $type = one_of(@types);
	my $value = value_for($type);
	my %m;
	if (chance(0.3))
	{
		$m{claim} = { $claim_field{$type} => ($int_type{$type} && chance(0.5) ? num($value) : $value) };
		$m{bucket} = { type => $type, value => $value } if chance(0.2);
	}
	else
	{
		$m{bucket} = { type => (chance(0.2) ? num({ USERNAMES => 4, EMAILS => 5, ROUTES => 1, PROJECT_IDS => 6,
			PAGES_DOMAINS => 17, SSH_KEYS => 9, USER_IDS => 10 }->{$type}) : $type), value => $value };
	}
	if ($create || chance(0.1))
	{
		$m{subject} = { type => one_of('USER', 'PROJECT', 'GROUP', 'NAMESPACE', num(4)),
			id => (chance(0.5) ? num(1 + int(rand(1000))) : '' . (1 + int(rand(1000)))) };
		$m{source} = { type => one_of('RAILS_TABLE_USERS', 'RAILS_TABLE_GROUPS', num(3)),
			rails_primary_key_id => (chance(0.5) ? num(1 + int(rand(1e6)))
				: encode_base64(pack('N', 1 + int(rand(1e6))), '')) };
		$m{user_data} = { '@type' => 'type.googleapis.com/x', v => num(int(rand(9))) } if chance(0.2);
	}
	return \%m;
}

sub valid_request
{
	my ($fn) = @_;
	my $cell = num(1 + int(rand(3)));
	if ($fn eq 'begin')
	{
		my %req = (cell_id => $cell);
		my %seen;
		for my $list ('create_records', 'destroy_records')
		{
			next if $list eq 'destroy_records' ? !chance(0.4) : !chance(0.85);
			my @recs;
			for (1 .. 1 + int(rand(3)))
			{
				my $m = valid_metadata($list eq 'create_records');
				my $k = jtext($m->{bucket} // $m->{claim});
				next if $seen{"$list$k"}++;
				push @recs, $m;
			}
			$req{$list} = \@recs;
		}
		$req{create_records} = [ valid_metadata(1) ] unless $req{create_records} || $req{destroy_records};
		$req{lease_uuid} = random_uuid() if chance(0.5);
		return \%req;
	}
	if ($fn eq 'get_record')
	{
		my $m = valid_metadata(0);
		delete @$m{qw(subject source user_data)};
		return $m;
	}
	if ($fn eq 'list_leases')
	{
		my %req = (cell_id => $cell);
		$req{limit} = num(int(rand(5))) if chance(0.5);
		$req{next} = one_of(@tokens) if @tokens && chance(0.3);
		$req{created_after} = '2020-01-01T00:00:00Z' if chance(0.2);
		return \%req;
	}
	my %req = (cell_id => $cell, source_type => one_of('RAILS_TABLE_USERS', num(1), 'RAILS_TABLE_GROUPS'));
	$req{bucket_types} = [ map { one_of(@types) } 1 .. int(rand(3)) ] if chance(0.4);
	$req{claim_types} = [ map { one_of(@types) } 1 .. int(rand(2)) ] if chance(0.2);
	$req{source_id_gt} = encode_base64(pack('N', int(rand(1e6))), '') if chance(0.3);
	$req{source_id_lte} = encode_base64(pack('N', int(rand(1e6))), '') if chance(0.2);
	$req{limit} = num(int(rand(20))) if chance(0.5);
	return \%req;
}

sub random_uuid
{
	return sprintf('%08x-%04x-4%03x-%04x-%04x%08x',
		int(rand(2**32)), int(rand(2**16)), int(rand(2**12)),
		0x8000 | int(rand(2**14)), int(rand(2**16)), int(rand(2**32)));
}

# ---------------------------------------------------------------------------
# Mutations.
sub weird_value
{
	my $k = int(rand(12));
	return one_of(num(0), num(-1), num(1), num(2147483648), num('9223372036854775807'),
		Raw->new('9223372036854775808'), Raw->new('-9223372036854775809'), Raw->new('1e400'),
		Raw->new('-0'), Raw->new('1.5'), Raw->new('1.0'), Raw->new('1e2'), Raw->new('-1e-400'))
	  if $k == 0;
	return one_of('', ' ', 'x' x (1000 + int(rand(200000))), 'ALICE', "\x{202e}evil", "e\x{301}",
		"\x{1F600}\x{1F600}", "\x{feff}bom", "a\x{200d}b", "\x{10ffff}", "tab\there",
		"new\nline", "\x{7f}", "\x{fffe}", "x" x 1024, "x" x 1025, "\x{e9}" x 1025)
	  if $k == 1;
	return one_of(Raw->new('"\u0000"'), Raw->new('"a\u0000b"'), Raw->new('"\ud800"'),
		Raw->new('"\udc00\ud800"'), Raw->new('"\ud83d\ude00"'), Raw->new('"\u00e9"'))
	  if $k == 2;
	return one_of('00000000-0000-0000-0000-000000000000', uc(random_uuid()), '{' . random_uuid() . '}',
		substr(random_uuid(), 1), random_uuid() . '0', 'zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz',
		join('', split(/-/, random_uuid())), 'not-a-uuid')
	  if $k == 3;
	return one_of('====', 'A', 'AA', 'AAA=', 'AB==', 'AQ', '-_-_', '+/+/', 'AAAA====', '@@@@',
		encode_base64('x' x 129, ''), encode_base64('x' x 128, ''), 'A===', 'AQ=', "AQ\n==",
		encode_base64("\x01" . join('', map { chr(int(rand(256))) } 1 .. 24), ''))
	  if $k == 4;
	return one_of('2026-01-01T00:00:00Z', '2026-13-01T00:00:00Z', '2026-02-30T00:00:00Z',
		'0000-01-01T00:00:00Z', '0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999999999Z',
		'2026-01-01 00:00:00', '2026-01-01T00:00:00+24:00', '2026-01-01T23:59:60Z',
		'294277-01-01T00:00:00Z', '2026-01-01T00:00:00.1234567890Z', '2026-01-01T00:00:00-23:59')
	  if $k == 5;
	return one_of('USERNAMES', 'usernames', 'UNSPECIFIED', 'GROUP', 'RAILS_TABLE_GROUPS', 'USER', '4',
		num(14), num(0), num(99), num(-4), 'ROUTES', 'PAGES_UNIQUE_DOMAINS', 'Usernames')
	  if $k == 6;
	return one_of(\1, \0, undef, [], {}, [ num(1), num(2) ], { '@type' => 'x' }, [ [] ], { a => {} })
	  if $k == 7;
	if ($k == 8)
	{
		# deep nesting
		my $depth = one_of(10, 100, 300);
		my $v = one_of(num(1), 'x', {});
		for (1 .. $depth) { $v = chance(0.5) ? [$v] : { a => $v }; }
		return $v;
	}
	if ($k == 9)
	{
		# a large batch, over claims.max_batch_size (200) or just under
		my $n = one_of(199, 200, 201, 1000);
		return [ map { valid_metadata(1) } 1 .. $n ];
	}
	return valid_metadata(chance(0.5)) if $k == 10;
	return one_of(num(1 + int(rand(3))), '' . (1 + int(rand(3))), '01', ' 1', '+1', num('1.0'));
}

my %camel = (cell_id => 'cellId', create_records => 'createRecords', destroy_records => 'destroyRecords',
	lease_uuid => 'leaseUuid', user_data => 'userData', rails_primary_key_id => 'railsPrimaryKeyId',
	source_type => 'sourceType', bucket_types => 'bucketTypes', claim_types => 'claimTypes',
	source_id_gt => 'sourceIdGt', source_id_lte => 'sourceIdLte', created_after => 'createdAfter',
	project_id => 'projectId', user_id => 'userId', pages_domain => 'pagesDomain', ssh_key => 'sshKey');

sub rename_key
{
	my ($k) = @_;
	my %back = reverse %camel;
	return one_of($camel{$k} // $k, $back{$k} // $k, ucfirst($k), uc($k), "${k}_", "_$k",
		($k =~ s/_(\w)/uc($1)/ger) . 'X', $k =~ s/_/-/gr, $k =~ s/_id$/ID/r, 'unknown_field');
}

sub slots
{
	my ($x, $acc) = @_;
	if (ref $x eq 'HASH')
	{
		for my $k (sort keys %$x) { push @$acc, [ $x, $k ]; slots($x->{$k}, $acc); }
	}
	elsif (ref $x eq 'ARRAY')
	{
		for my $i (0 .. $#$x) { push @$acc, [ $x, $i ]; slots($x->[$i], $acc); }
	}
	return $acc;
}

sub mutate
{
	my ($req) = @_;
	return weird_value() if chance(0.03);    # not an object at all
	for (1 .. 1 + int(rand(3)))
	{
		my @sl = @{ slots($req, []) };
		my $m = int(rand(7));
		if (!@sl || $m == 0)
		{
			# an unknown or misspelt field at the top or in a random object
			my @objs = ($req, grep { ref $_ eq 'HASH' } map { $_->[0] } @sl);
			my $o = one_of(@objs);
			$o->{ one_of('foo', 'cell', 'CELL_ID', 'records', '@type', '', "\x{e9}", 'lease') } = weird_value()
			  if ref $o eq 'HASH';
			next;
		}
		my ($c, $k) = @{ one_of(@sl) };
		if ($m == 1 || $m == 2)
		{
			if (ref $c eq 'HASH') { $c->{$k} = weird_value(); } else { $c->[$k] = weird_value(); }
		}
		elsif ($m == 3)
		{
			if (ref $c eq 'HASH') { delete $c->{$k}; } else { splice(@$c, $k, 1); }
		}
		elsif ($m == 4 && ref $c eq 'HASH')
		{
			my $nk = rename_key($k);
			my $v = delete $c->{$k};
			$c->{$nk} = $v;
			$c->{$k} = $v if chance(0.2);    # both spellings: "given twice"
		}
		elsif ($m == 5 && ref $c eq 'ARRAY')
		{
			push @$c, $c->[$k];                 # the same value twice in a list
		}
		elsif ($m == 6 && ref $c eq 'HASH')
		{
			# JSON null for a field, or a duplicate key in the text
			if (chance(0.5)) { $c->{$k} = undef; }
			else { my %h = %$c; my @p = map { ($_ => $h{$_}) } sort keys %h; push @p, $k, weird_value(); return Dup->new(@p) if $c == $req; }
		}
		else
		{
			if (ref $c eq 'HASH') { $c->{$k} = weird_value(); } else { $c->[$k] = weird_value(); }
		}
	}
	return $req;
}

# Text-level damage after encoding.
sub damage_text
{
	my ($t) = @_;
	my $k = int(rand(6));
	return substr($t, 0, int(rand(length($t)))) if $k == 0;
	if ($k == 1)
	{
		my $p = int(rand(length($t)));
		return substr($t, 0, $p) . one_of("\x01", "\x1f", '\\', '"', ',', '}', ']', '\\u0000', '\\ud800', "\x{2028}") . substr($t, $p);
	}
	return $t =~ s/"([a-z_]+)":/"\\u00$1":/r if $k == 2;      # broken escapes
	return "$t$t" if $k == 3;
	return " \t\n$t\n " if $k == 4;
	return $t =~ s/:/ : /gr;
}

# ---------------------------------------------------------------------------
my @fns = qw(begin commit rollback get_record list_leases list_records);
my %fn_sql = (begin => 'claims_begin_update', get_record => 'claims_get_record',
	list_leases => 'claims_list_leases', list_records => 'claims_list_records');

# One request: [function, SQL text of the call].
sub make_request
{
	my $fn = one_of(@fns);
	if ($fn eq 'commit' || $fn eq 'rollback')
	{
		my ($cell, $uuid);
		my $lease = @leases ? one_of(@leases) : [ 1, random_uuid() ];
		my $k = rand();
		if ($k < 0.6) { ($cell, $uuid) = ($lease->[0], "'$lease->[1]'"); }
		elsif ($k < 0.7) { ($cell, $uuid) = (1 + ($lease->[0] % 3), "'$lease->[1]'"); }
		else
		{
			$cell = one_of(1, 2, 3, 0, -1, 'NULL', '9223372036854775807', '(-9223372036854775807 - 1)');
			$uuid = one_of("'" . random_uuid() . "'", 'NULL', "'$lease->[1]'",
				"'00000000-0000-0000-0000-000000000000'", sql_quote(weird_value_text()));
		}
		return [ $fn, "SELECT claims_$fn($cell, ${uuid}::uuid)::text" ];
	}
	return [ $fn, "SELECT $fn_sql{$fn}(NULL)::text" ] if chance(0.01);
	my $req = valid_request($fn);
	$req = mutate($req) if chance(0.75);
	my $text = jtext($req);
	$text = damage_text($text) if chance(0.1);
	return [ $fn, "SELECT $fn_sql{$fn}(" . sql_quote($text) . "::jsonb)::text" ];
}

sub weird_value_text
{
	my $v = weird_value();
	return ref $v ? jtext($v) : $v;
}

my (%count, %codes, @bad, $lost, $sent);
$sent = 0;
my $checks = 0;
my @check_problems;
while ($sent < $total)
{
	my $n = $total - $sent < $batch ? $total - $sent : $batch;
	my @reqs = map { make_request() } 1 .. $n;
	my $sql = 'SELECT pg_temp.try(q) FROM unnest(ARRAY['
	  . join(",\n", map { sql_quote($_->[1]) } @reqs)
	  . ']::text[]) WITH ORDINALITY AS r(q, i) ORDER BY i';
	my $res = $s->query($sql);
	if ($res->{lost} || $res->{sqlstate} ne '00000')
	{
		$lost = $res->{lost} ? 'the session was lost' : "the batch failed: $res->{err}";
		diag("batch of requests failed ($lost); it was:\n" . substr($sql, 0, 4000));
		last;
	}
	my $out = $res->{out};
	utf8::decode($out);
	my @lines = split /\n/, $out, -1;
	if (@lines != $n)
	{
		$lost = 'the batch answered ' . scalar(@lines) . " lines for $n requests";
		last;
	}
	for my $i (0 .. $n - 1)
	{
		my ($fn, $call) = @{ $reqs[$i] };
		my ($code, $rest) = split /\|/, $lines[$i], 2;
		$count{$fn}{ $code eq 'ok' ? 'ok' : 'error' }++;
		$codes{$code}++;
		if ($code eq 'ok')
		{
			if ($fn eq 'begin' && $rest =~ /"cell_id": "(\d+)", "lease_uuid": "([0-9a-f-]{36})"/)
			{
				push @leases, [ $1, $2 ];
				shift @leases if @leases > 200;
			}
			if ($fn eq 'list_leases' && $rest =~ /"next": (\{[^}]*\})/)
			{
				my $tok = eval { dec($1) };
				if ($tok)
				{
					push @tokens, $tok;
					shift @tokens if @tokens > 20;
				}
			}
		}
		elsif (!$documented{$code})
		{
			push @bad, "$fn answered $code ($rest) to: " . substr($call, 0, 600);
		}
	}
	$sent += $n;
	if ($sent % 2000 < $batch || $sent >= $total)
	{
		$checks++;
		push @check_problems, map { "after $sent requests: $_" } claims_check_rows($node);
	}
}

ok(!$lost, "all $total requests were answered") or diag($lost);
is($sent, $total, "$sent requests sent");
is(scalar(@bad), 0, 'every call succeeded or failed with a documented SQLSTATE')
  or diag(join("\n", @bad[ 0 .. ($#bad < 30 ? $#bad : 30) ]));
for my $fn (@fns)
{
	ok(($count{$fn}{ok} // 0) > 0 && ($count{$fn}{error} // 0) > 0,
		"$fn both succeeded and failed (" . ($count{$fn}{ok} // 0) . ' ok, ' . ($count{$fn}{error} // 0) . ' errors)');
}
diag('answers: ' . join(', ', map { "$_=$codes{$_}" } sort keys %codes));

$s->close;
is($node->safe_psql('postgres', 'SELECT 1'), '1', 'the server is still up');
is(join("\n", crash_lines_in_log($node, $log_start)), '', 'no server process was terminated');
is(join("\n", @check_problems), '', "claims_check() stayed empty ($checks checks)");
is(join("\n", amcheck_failures($node)), '', 'amcheck passes on every index');

diag(sprintf('figures: fuzzed_requests=%d seconds=%.0f seed=%d', $sent, time() - $t0, $seed));
$node->stop;
done_testing();
