# Mutual TLS: a cell's client certificate is bound to the cell's database
# role (hostssl + cert authentication with clientcert=verify-full + a
# pg_ident.conf map), and the role is bound to the cell (claims_register_cell).
#
# A throwaway CA signs a server certificate (CN localhost, subjectAltName
# DNS:localhost and IP:127.0.0.1) and two client certificates, CN=cell-one
# and CN=cell-two. pg_ident.conf maps cell-one to role cell_one and cell-two
# to cell_two. The test shows that cell one's certificate acts for cell 1
# and not for cell 2, cannot log in as cell_two, and that connections
# without a certificate, with a certificate of another CA, or without TLS
# are refused.
use strict;
use warnings;

use File::Copy;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

if (system('openssl version >/dev/null 2>&1') != 0)
{
	plan skip_all => 'openssl is not installed';
}
my $configure = `pg_config --configure`;
if ($configure !~ /with-(openssl|ssl=openssl)/)
{
	plan skip_all => 'PostgreSQL was built without OpenSSL';
}

# Certificates -----------------------------------------------------------------
my $certs = PostgreSQL::Test::Utils::tempdir('certs');

sub openssl
{
	my @cmd = ('openssl', @_);
	run_log(\@cmd) or BAIL_OUT("openssl @_ failed");
	return;
}

sub write_file
{
	my ($path, $text) = @_;
	open my $fh, '>', $path or BAIL_OUT("cannot write $path: $!");
	print $fh $text;
	close $fh;
	return;
}

# A CA, and a certificate signed by it: (ca name, file stem, subject, extensions, serial).
sub make_ca
{
	my ($stem, $cn) = @_;
	openssl('req', '-x509', '-new', '-nodes', '-days', '2',
		'-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-subj', "/CN=$cn",
		'-addext', 'basicConstraints=critical,CA:TRUE',
		'-addext', 'keyUsage=critical,keyCertSign,cRLSign',
		'-keyout', "$certs/$stem.key", '-out', "$certs/$stem.crt");
	chmod 0600, "$certs/$stem.key";
	return;
}

sub make_cert
{
	my ($ca, $stem, $cn, $ext, $serial) = @_;
	write_file("$certs/$stem.ext", $ext);
	openssl('req', '-new', '-nodes',
		'-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1',
		'-subj', "/CN=$cn",
		'-keyout', "$certs/$stem.key", '-out', "$certs/$stem.csr");
	openssl('x509', '-req', '-in', "$certs/$stem.csr", '-days', '2',
		'-CA', "$certs/$ca.crt", '-CAkey', "$certs/$ca.key", '-set_serial', $serial,
		'-extfile', "$certs/$stem.ext", '-out', "$certs/$stem.crt");
	chmod 0600, "$certs/$stem.key";
	return;
}

my $client_ext = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\n"
  . "extendedKeyUsage=clientAuth\n";
make_ca('ca', 'claims test CA');
make_cert('ca', 'server', 'localhost',
	"basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
	  . "extendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n", 1001);
make_cert('ca', 'cell-one', 'cell-one', $client_ext, 1002);
make_cert('ca', 'cell-two', 'cell-two', $client_ext, 1003);
# An impostor: a certificate with CN=cell-one from a CA the server does not trust.
make_ca('rogue-ca', 'rogue CA');
make_cert('rogue-ca', 'rogue-one', 'cell-one', $client_ext, 2001);

# Server ---------------------------------------------------------------------------
my $node = PostgreSQL::Test::Cluster->new('mtls');
$node->init(allows_streaming => 0);
my $pgdata = $node->data_dir;
for my $f ('server.crt', 'server.key', 'ca.crt')
{
	copy("$certs/$f", "$pgdata/$f") or BAIL_OUT("cannot copy $f: $!");
}
chmod 0600, "$pgdata/server.key";
$node->append_conf('postgresql.conf', <<"EOC");
listen_addresses = '127.0.0.1'
ssl = on
ssl_cert_file = 'server.crt'
ssl_key_file = 'server.key'
ssl_ca_file = 'ca.crt'
EOC
# Local (unix socket) connections are trusted for the setup below; every TCP
# connection must use TLS and present a client certificate of the CA whose
# CN maps to the requested role.
write_file("$pgdata/pg_hba.conf", <<"EOC");
local   all   all                 trust
hostssl all   all   127.0.0.1/32  cert clientcert=verify-full map=cells
EOC
write_file("$pgdata/pg_ident.conf", <<"EOC");
# MAPNAME  CERTIFICATE-CN  DATABASE-ROLE
cells      cell-one        cell_one
cells      cell-two        cell_two
EOC
$node->start;

$node->safe_psql('postgres', <<'EOS');
CREATE EXTENSION claims;
CREATE ROLE cell_one LOGIN;
CREATE ROLE cell_two LOGIN;
SELECT claims_register_cell(1, 'cell one', 'cell_one', 'mTLS test');
SELECT claims_register_cell(2, 'cell two', 'cell_two', 'mTLS test');
EOS

my $port = $node->port;
my $tls  = "host=127.0.0.1 port=$port dbname=postgres sslmode=verify-full sslrootcert=$certs/ca.crt";

sub as_cert
{
	my ($cert, $user) = @_;
	return "$tls user=$user sslcert=$certs/$cert.crt sslkey=$certs/$cert.key";
}

sub begin_sql
{
	my ($cell, $value) = @_;
	return "\\set VERBOSITY verbose\n"
	  . "SELECT claims_begin_update('{\"cell_id\": $cell, \"create_records\": [{\"claim\": {\"username\": \"$value\"},"
	  . " \"subject\": {\"type\": \"USER\", \"id\": 1},"
	  . " \"source\": {\"type\": \"RAILS_TABLE_USERS\", \"rails_primary_key_id\": 1}}]}') ->> 'cell_id';";
}

# Run SQL over TLS; returns (exit code, stdout, stderr).
sub run_tls
{
	my ($connstr, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql('postgres', $sql,
		connstr => $connstr, extra_params => ['-w'], on_error_stop => 1);
	return ($ret, $stdout, $stderr);
}

# Cell one's certificate -----------------------------------------------------------
$node->connect_ok(as_cert('cell-one', 'cell_one'),
	"cell one's certificate logs in as cell_one",
	sql             => "SELECT current_user, ssl, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
	expected_stdout => qr{^cell_one\|t\|/CN=cell-one$});

my ($ret, $out, $err) = run_tls(as_cert('cell-one', 'cell_one'), begin_sql(1, 'mtls-one'));
is($ret, 0, "cell one's certificate: begin_update for cell 1 succeeds");
is($out, '1', "cell one's certificate: the lease belongs to cell 1");

($ret, $out, $err) = run_tls(as_cert('cell-one', 'cell_one'), begin_sql(2, 'mtls-stolen'));
isnt($ret, 0, "cell one's certificate: begin_update for cell 2 fails");
like($err, qr/ERROR:\s+42501: role "cell_one" may not act for cell 2/,
	"cell one's certificate: refused for cell 2 with 42501");

($ret, $out, $err) = run_tls(as_cert('cell-one', 'cell_one'),
	"\\set VERBOSITY verbose\nSELECT claims_list_leases('{\"cell_id\": 2}');");
like($err, qr/ERROR:\s+42501:/, "cell one's certificate: list_leases for cell 2 refused with 42501");

$node->connect_fails(as_cert('cell-one', 'cell_two'),
	"cell one's certificate cannot log in as cell_two",
	expected_stderr => qr/certificate authentication failed for user "cell_two"/,
	log_like        => [qr/no match in usermap "cells" for user "cell_two" authenticated as "cell-one"/]);

# Cell two's certificate, for symmetry.
($ret, $out, $err) = run_tls(as_cert('cell-two', 'cell_two'), begin_sql(2, 'mtls-two'));
is($ret . $out, '02', "cell two's certificate: begin_update for cell 2 succeeds");
($ret, $out, $err) = run_tls(as_cert('cell-two', 'cell_two'), begin_sql(1, 'mtls-stolen'));
like($err, qr/ERROR:\s+42501:/, "cell two's certificate: refused for cell 1 with 42501");
$node->connect_fails(as_cert('cell-two', 'cell_one'),
	"cell two's certificate cannot log in as cell_one",
	expected_stderr => qr/certificate authentication failed for user "cell_one"/);

# What is refused at the door ---------------------------------------------------------
$node->connect_fails("$tls user=cell_one sslcert=$certs/none.crt sslkey=$certs/none.key",
	'no client certificate: refused',
	expected_stderr => qr/connection requires a valid client certificate/);
$node->connect_fails(as_cert('rogue-one', 'cell_one'),
	'a CN=cell-one certificate of another CA: refused',
	expected_stderr => qr/certificate verify failed|unknown ca|SSL error/i);
$node->connect_fails("host=127.0.0.1 port=$port dbname=postgres user=cell_one sslmode=disable",
	'TCP without TLS: refused',
	expected_stderr => qr/no pg_hba.conf entry for host "127.0.0.1", user "cell_one"/);

# Nothing reached cell 2.
is($node->safe_psql('postgres',
		"SELECT string_agg(creator_id || ':' || bucket_value, ',' ORDER BY bucket_value) FROM claims"),
	'1:mtls-one,2:mtls-two',
	'only the permitted leases exist');

$node->stop;
done_testing();
