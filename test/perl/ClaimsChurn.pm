
# ClaimsChurn.pm: shared pieces of the cache churn tests (test/t/15N_*.pl).
#
# The store keeps per-backend copies of its registries, its cell list, its
# prepared statements and where its lookup index is. These tests change
# what those copies reflect while clients use them:
#
#  - the server's identity (postmaster pid and start time) and the signs
#    of a crash restart in its log, so a test can show it never restarted;
#  - a cell whose records span several pages of claims_list_records, and a
#    reference read of those pages checked against what was loaded;
#  - churners that run for a bounded time: an ordinary role creating and
#    dropping temporary tables (each one tens of invalidation messages, so
#    that busy backends overflow the shared invalidation queue and have to
#    reset every cache), and an operator adding, changing and removing
#    registry types that no record uses.
#
# Every churner and client writes a summary file; children leave with
# POSIX::_exit (see ClaimsFault.pm).
package ClaimsChurn;

use strict;
use warnings;

use Exporter 'import';
use ClaimsFault;
use List::Util ();
use MIME::Base64 ();
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes ();

our @EXPORT = qw(
  server_identity restart_evidence log_offset source_id_b64 load_source_records
  expected_listing page_request page_sql read_reference temp_table_churn
  registry_churn write_summary read_summary as_role
);

# The running server: postmaster pid (postmaster.pid) and start time. A
# crash of one backend makes the postmaster reinitialize without changing
# either, so tests check the log and a sentinel session as well.
sub server_identity
{
	my ($node) = @_;
	my $pid = '?';
	if (open my $fh, '<', $node->data_dir . '/postmaster.pid')
	{
		$pid = <$fh> // '?';
		chomp $pid;
		close $fh;
	}
	my $start = $node->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
	return "postmaster $pid started $start";
}

# Current length of the server log, to look only at what follows.
sub log_offset
{
	my ($node) = @_;
	return -s $node->logfile // 0;
}

# Lines of the log (after $offset) showing that a server process crashed
# or that the server went through crash recovery.
sub restart_evidence
{
	my ($node, $offset) = @_;
	my @lines = crash_lines_in_log($node, $offset);
	my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
	$log = substr($log, $offset) if defined $offset && $offset <= length($log);
	push @lines, grep {
		/all server processes terminated; reinitializing/
		  || /terminating connection because of crash of another server process/
		  || /database system was interrupted/
		  || /database system was not properly shut down/
	} split /\n/, $log;
	return @lines;
}

# A node's connection string for another role.
sub as_role
{
	my ($node, $role) = @_;
	return $node->connstr('postgres') . " user=$role";
}

# rails_primary_key_id of source $n as the store answers it: a JSON number
# is the int64 form, 8 bytes big-endian, answered in standard base64.
sub source_id_b64
{
	my ($n) = @_;
	return MIME::Base64::encode_base64(pack('Q>', $n), '');
}

# The records of source $s: a username and an email, with some user data
# so that a page of 1000 records is a document of several hundred kB.
sub source_records
{
	my ($prefix, $s) = @_;
	my $ud = { '@type' => 'type.googleapis.com/churn.v1.Note', source => $s,
		note => ('churn note ' x 20) . $s };
	return (metadata('USERNAMES', "$prefix-$s", $s, $s, $ud),
		metadata('EMAILS', "$prefix-$s\@churn.test", $s, $s, $ud));
}

# Create and commit the records of sources 1 .. $nsources for a cell (as
# the bootstrap superuser, an administrator), at most 1000 per lease.
sub load_source_records
{
	my ($node, $cell, $nsources, $prefix) = @_;
	my @all = map { source_records($prefix, $_) } 1 .. $nsources;
	while (my @batch = splice(@all, 0, 1000))
	{
		my $req = enc({ cell_id => $cell, create_records => \@batch });
		$node->safe_psql('postgres',
			'SELECT claims_begin_update(' . sql_quote($req) . "::jsonb)->>'lease_uuid' AS l \\gset\n"
			  . "SELECT claims_commit($cell, :'l');");
	}
	return;
}

# What claims_list_records must answer for those records, in its order
# (source id bytes, then bucket type: USERNAMES 4 before EMAILS 5), one
# line per record: "type value source_id status".
sub expected_listing
{
	my ($nsources, $prefix) = @_;
	return map {
		("USERNAMES $prefix-$_ " . source_id_b64($_) . ' ACTIVE',
		 "EMAILS $prefix-$_\@churn.test " . source_id_b64($_) . ' ACTIVE')
	} 1 .. $nsources;
}

# Request of one page.
sub page_request
{
	my ($cell, $gt) = @_;
	my %req = (cell_id => $cell, source_type => 'RAILS_TABLE_USERS', limit => 1000);
	$req{source_id_gt} = $gt if defined $gt;
	return enc(\%req);
}

# One call of claims_list_records, answered as
# "md5 of the document|records|truncated|last source id" (the call is made
# once: the subquery is materialized).
sub page_sql
{
	my ($req) = @_;
	return 'WITH p AS MATERIALIZED (SELECT claims_list_records(' . sql_quote($req) . '::jsonb) AS r) '
	  . "SELECT md5(r::text) || '|' || jsonb_array_length(r->'records') || '|' || (r->>'truncated') "
	  . "|| '|' || coalesce(r->'records'->-1->'metadata'->'source'->>'rails_primary_key_id', '') FROM p";
}

# Page through a cell's records with a session, as a reconciler does.
# Returns the pages ({req, answer}) and the records listed, one line each
# as expected_listing() writes them.
sub read_reference
{
	my ($session, $cell) = @_;
	my (@pages, @records);
	my $gt;
	for (1 .. 1000)
	{
		my $req = page_request($cell, $gt);
		my $r = $session->query(page_sql($req));
		die "reference page failed: " . ($r->{err} // '') if $r->{lost} || $r->{sqlstate} ne '00000';
		my $listed = $session->query(
			'WITH p AS MATERIALIZED (SELECT claims_list_records(' . sql_quote($req) . '::jsonb) AS r) '
			  . "SELECT e->'metadata'->'bucket'->>'type', e->'metadata'->'bucket'->>'value', "
			  . "e->'metadata'->'source'->>'rails_primary_key_id', e->>'status' "
			  . 'FROM p, jsonb_array_elements(r->\'records\') WITH ORDINALITY AS x(e, i) ORDER BY i');
		die "reference page failed: " . ($listed->{err} // '')
		  if $listed->{lost} || $listed->{sqlstate} ne '00000';
		push @records, map { join(' ', split /\|/) } grep { $_ ne '' } split /\n/, $listed->{out};
		push @pages, { req => $req, answer => $r->{out} };
		my (undef, undef, $truncated, $last) = split /\|/, $r->{out}, -1;
		last if $truncated ne 'true';
		$gt = $last;
	}
	return (\@pages, \@records);
}

# Write a child's summary: one "key value" line per entry.
sub write_summary
{
	my ($file, %sum) = @_;
	open my $fh, '>', "$file.tmp" or die "open $file: $!";
	print $fh "$_ $sum{$_}\n" for sort keys %sum;
	close $fh;
	rename "$file.tmp", $file or die "rename $file: $!";
	return;
}

# Read a summary written by write_summary (empty when the child wrote none).
sub read_summary
{
	my ($file) = @_;
	my %sum;
	open my $fh, '<', $file or return %sum;
	while (my $line = <$fh>)
	{
		chomp $line;
		my ($k, $v) = split / /, $line, 2;
		$sum{$k} = $v;
	}
	close $fh;
	return %sum;
}

# Run a DO block in bursts of at most 2 s until the deadline, reconnecting
# after a lost connection; the block adds its count to the setting
# claims_churn.n. Returns (count, bursts, lost, errors by SQLSTATE).
sub churn_bursts
{
	my ($connstr, $deadline, $body) = @_;
	my ($count, $bursts, $lost, %errors) = (0, 0, 0);
	my $s;
	while (Time::HiRes::time() < $deadline - 0.05)
	{
		if (!$s)
		{
			$s = ClaimsFault::Session->new($connstr, timeout => 120);
			if (!$s->connect)
			{
				undef $s;
				Time::HiRes::sleep(0.2);
				next;
			}
		}
		my $secs = sprintf('%.3f', List::Util::min(2, $deadline - Time::HiRes::time()));
		last if $secs <= 0;
		my $r = $s->query(<<"EOS");
DO \$churn\$
DECLARE
  until_t timestamptz := clock_timestamp() + interval '$secs seconds';
  n bigint := 0;
BEGIN
  WHILE clock_timestamp() < until_t LOOP
$body
  END LOOP;
  PERFORM set_config('claims_churn.n', n::text, false);
END \$churn\$
EOS
		$bursts++;
		if ($r->{lost})
		{
			$lost++;
			$s->close;
			undef $s;
			next;
		}
		if ($r->{sqlstate} ne '00000')
		{
			$errors{ $r->{sqlstate} }++;
			next;
		}
		my $n = $s->query("SELECT current_setting('claims_churn.n')");
		$count += $n->{out} if !$n->{lost} && $n->{sqlstate} eq '00000' && $n->{out} =~ /^\d+$/;
	}
	$s->close if $s;
	return ($count, $bursts, $lost, %errors);
}

# An ordinary role creates temporary tables (with an index and a TOAST
# table, dropped at commit) in a tight loop of committed transactions.
sub temp_table_churn
{
	my ($connstr, $deadline, $file) = @_;
	my ($count, $bursts, $lost, %errors) = churn_bursts($connstr, $deadline, <<'EOB');
    CREATE TEMP TABLE claims_churn_tmp (a int PRIMARY KEY, b text, c jsonb) ON COMMIT DROP;
    COMMIT;
    n := n + 1;
EOB
	write_summary($file, temp_tables => $count, bursts => $bursts, lost => $lost,
		errors => join(',', map { "$_=$errors{$_}" } sort keys %errors));
	return;
}

# An operator adds, changes and removes types no record uses, in all three
# registries: every committed statement invalidates every backend's copy.
sub registry_churn
{
	my ($connstr, $deadline, $file) = @_;
	my ($count, $bursts, $lost, %errors) = churn_bursts($connstr, $deadline, <<'EOB');
    DELETE FROM claim_bucket_types WHERE type_id = 900;
    DELETE FROM claim_subject_types WHERE type_id = 900;
    DELETE FROM claim_source_types WHERE type_id = 900;
    COMMIT;
    INSERT INTO claim_bucket_types (type_id, name, claim_field) VALUES (900, 'CHURN_BUCKETS', 'churn_bucket');
    COMMIT;
    INSERT INTO claim_subject_types (type_id, name) VALUES (900, 'CHURN_SUBJECTS');
    COMMIT;
    INSERT INTO claim_source_types (type_id, name) VALUES (900, 'CHURN_SOURCES');
    COMMIT;
    UPDATE claim_bucket_types SET aliases = '{CHURN_BUCKETS_OLD}' WHERE type_id = 900;
    COMMIT;
    n := n + 5;
EOB
	write_summary($file, registry_changes => $count, bursts => $bursts, lost => $lost,
		errors => join(',', map { "$_=$errors{$_}" } sort keys %errors));
	return;
}

1;
