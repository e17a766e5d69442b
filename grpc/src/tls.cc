// mTLS credentials whose files a SIGHUP replaces.
#include "tls.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace claims_grpc {

// Read a whole file; false when it cannot be read or is empty.
static bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return !out->empty();
}

// Write data to dir/name through a temporary file and a rename.
static bool WriteAtomically(const std::string& dir, const std::string& name,
                            const std::string& data) {
  std::string tmp = dir + "/." + name + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return false;
    out << data;
    if (!out.good()) return false;
  }
  chmod(tmp.c_str(), 0600);
  return rename(tmp.c_str(), (dir + "/" + name).c_str()) == 0;
}

bool CopyTlsFiles(const Config& cfg, const std::string& dir, std::string* err) {
  std::string cert, key, ca;
  if (!ReadFile(cfg.tls_cert, &cert)) *err = "cannot read --tls-cert " + cfg.tls_cert;
  else if (!ReadFile(cfg.tls_key, &key)) *err = "cannot read --tls-key " + cfg.tls_key;
  else if (!ReadFile(cfg.client_ca, &ca)) *err = "cannot read --client-ca " + cfg.client_ca;
  else if (!WriteAtomically(dir, "server.key", key) || !WriteAtomically(dir, "server.crt", cert) ||
           !WriteAtomically(dir, "client-ca.crt", ca))
    *err = "cannot write the TLS files into " + dir;
  else
    return true;
  return false;
}

std::shared_ptr<grpc::ServerCredentials> MutualTlsCredentials(const Config& cfg,
                                                              const std::string& dir) {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      dir + "/server.key", dir + "/server.crt", dir + "/client-ca.crt",
      static_cast<unsigned int>(cfg.tls_watch_interval_s));
  grpc::experimental::TlsServerCredentialsOptions opts(provider);
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  opts.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(opts);
}

}  // namespace claims_grpc
