
# An API call whose error is caught (a PL/pgSQL EXCEPTION block, a
# savepoint) ends there: what it set for its length (the caller role it
# judges, the extension's schema, the count of calls running) is given back
# by the abort of the subtransaction it began in, not left in force until
# the transaction ends. Seen from SQL through the count of calls running: a
# cache reloaded while another call is counted as running keeps its old
# version alive, in TopTransactionContext, until the transaction ends; with
# no call running the old version is freed at once.
use strict;
use warnings;

use FindBin;
use lib "$FindBin::RealBin/../perl";

use ClaimsFault;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = new_claims_node('main');
$node->safe_psql('postgres', q{
CREATE FUNCTION caught(stmt text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE stmt;
    RETURN '00000';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- versions of the claims caches kept alive until the transaction ends
CREATE FUNCTION kept_cache_versions() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM pg_backend_memory_contexts
    WHERE name = 'claims cache' AND parent = 'TopTransactionContext'
$$;
});

my $bad_begin = q{SELECT claims_begin_update('{"cell_id": 1, "bogus": true}')};
my $bad_commit = q{SELECT claims_commit(1, '00000000-0000-4000-8000-000000000000')};
my $list = q{SELECT claims_list_leases('{"cell_id": 1}') ? 'leases'};
# make the cell cache stale: the next call reloads it
my $touch_cells = q{UPDATE claim_cells SET updated_at = now() WHERE cell_id = 20};

# Run $sql (statements of one session) and return its output's last line.
sub last_line
{
	my ($sql) = @_;
	my @lines = split /\n/, $node->safe_psql('postgres', $sql);
	return $lines[-1] // '';
}

# 1. Errors caught by an EXCEPTION block, then calls in the same
# transaction that reload the cell cache.
is( last_line(qq{
BEGIN;
$list;
SELECT caught(\$q\$$bad_begin\$q\$), caught(\$q\$$bad_commit\$q\$);
$touch_cells;
$list;
$touch_cells;
$list;
SELECT kept_cache_versions();
COMMIT;
}), '0', 'after errors caught by EXCEPTION blocks, a reloaded cache frees its old version at once');

# The same in one PL/pgSQL block that goes on calling after the error.
is( last_line(qq{
BEGIN;
DO \$\$
BEGIN
    PERFORM claims_list_leases('{"cell_id": 1}');
    BEGIN
        PERFORM claims_begin_update('{"cell_id": 1, "bogus": true}');
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    UPDATE claim_cells SET updated_at = now() WHERE cell_id = 20;
    PERFORM claims_list_leases('{"cell_id": 1}');
END \$\$;
SELECT kept_cache_versions();
COMMIT;
}), '0', 'the same inside one PL/pgSQL block that calls again after the caught error');

# 2. An error rolled back to a savepoint.
my ($rc, $out, $err) = $node->psql('postgres', qq{
BEGIN;
$list;
SAVEPOINT s;
$bad_begin;
ROLLBACK TO SAVEPOINT s;
$touch_cells;
$list;
SELECT kept_cache_versions();
COMMIT;
}, on_error_stop => 0);
is((split /\n/, $out)[-1], '0', 'after an error rolled back to a savepoint, too');
like($err, qr/ERROR:.*bogus/, 'the savepoint did roll back the call\'s error');

# 3. A call nested in another call's statement (a trigger on the claims
# table) fails and the trigger catches it; the outer call goes on and ends.
# (The trigger runs under the outer call's search path, pg_catalog: it
# names the schema.)
$node->safe_psql('postgres', q{
CREATE FUNCTION nested_failure() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        PERFORM public.claims_commit(1, '00000000-0000-4000-8000-000000000000');
    EXCEPTION WHEN OTHERS THEN
        RAISE NOTICE 'nested call failed: %', SQLSTATE;
    END;
    RETURN NULL;
END $$;
CREATE TRIGGER nested_failure AFTER INSERT ON claims
    FOR EACH STATEMENT EXECUTE FUNCTION nested_failure();
});
($rc, $out, $err) = $node->psql('postgres', qq{
BEGIN;
$list;
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "nested"}, "subject": {"type": "USER", "id": 1}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 1}}]}') ? 'lease_uuid';
$touch_cells;
$list;
SELECT kept_cache_versions();
COMMIT;
});
like($err, qr/nested call failed: P0002/, 'the nested call failed inside the outer call');
is((split /\n/, $out)[-1], '0', 'after the outer call ends, no call is counted as running');
$node->safe_psql('postgres', 'DROP TRIGGER nested_failure ON claims');

# Without any error a reload frees its old version (the check above can see
# a kept version: here one is kept on purpose, by a call made while
# another runs).
$node->safe_psql('postgres', q{
CREATE FUNCTION nested_reload() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE public.claim_cells SET updated_at = now() WHERE cell_id = 20;
    PERFORM public.claims_list_leases('{"cell_id": 1}');
    RETURN NULL;
END $$;
CREATE TRIGGER nested_reload AFTER INSERT ON claims
    FOR EACH STATEMENT EXECUTE FUNCTION nested_reload();
});
is( last_line(q{
BEGIN;
SELECT claims_list_leases('{"cell_id": 1}') ? 'leases';
SELECT claims_begin_update('{"cell_id": 1, "create_records": [{"bucket": {"type": "USERNAMES", "value": "nested-2"}, "subject": {"type": "USER", "id": 2}, "source": {"type": "RAILS_TABLE_USERS", "rails_primary_key_id": 2}}]}') ? 'lease_uuid';
SELECT kept_cache_versions();
COMMIT;
}), '1', 'a cache reloaded by a call nested in a running call keeps its old version (the check can fail)');
$node->safe_psql('postgres', 'DROP TRIGGER nested_reload ON claims');

# The session goes on working as the right role: a cell role is refused for
# another cell after errors caught while a superuser called.
$node->safe_psql('postgres', q{
CREATE ROLE cell_one LOGIN;
SELECT claims_register_cell(30, 'cell-30', 'cell_one');
GRANT EXECUTE ON FUNCTION caught(text) TO cell_one;
GRANT claims_cell TO cell_one;
});
is( last_line(qq{
BEGIN;
SELECT caught(\$q\$$bad_begin\$q\$);
SET ROLE cell_one;
SELECT caught(\$q\$SELECT claims_list_leases('{"cell_id": 1}')\$q\$),
       caught(\$q\$SELECT claims_list_leases('{"cell_id": 30}')\$q\$);
COMMIT;
}), '42501|00000', 'after caught errors, calls judge the role that calls them');

$node->stop;
done_testing();
