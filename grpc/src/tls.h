// Server TLS: mTLS only. The configured files are checked (the key matches the
// certificate, the CA file holds certificates) and copied into a private
// directory that gRPC's FileWatcherCertificateProvider watches; SIGHUP checks
// and copies them again, so a bad file on reload keeps the previous ones.
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "config.h"

namespace claims_grpc {

class TlsFiles {
 public:
  ~TlsFiles();
  // Make the private directory and the first copies.
  bool Init(const Config& cfg, std::string* err);
  // Check and copy the configured files again (SIGHUP).
  bool Reload(std::string* err);
  // Credentials that require and verify a client certificate of the CA.
  std::shared_ptr<grpc::ServerCredentials> Credentials() const;

 private:
  bool CheckAndCopy(std::string* err);

  Config cfg_;
  std::string dir_;
  bool own_dir_ = false;
};

}  // namespace claims_grpc
