// Server credentials: mTLS only, from private copies of the TLS files that a
// reload replaces (a certificate provider re-reads them).
#pragma once

#include <grpcpp/security/server_credentials.h>

#include <memory>
#include <string>

#include "config.h"

namespace claims_grpc {

// Copy the configured TLS files into the runtime directory (atomically, and
// only when all three are readable); false with *err otherwise.
bool CopyTlsFiles(const Config& cfg, const std::string& dir, std::string* err);
// Credentials that demand and verify a client certificate signed by the CA.
std::shared_ptr<grpc::ServerCredentials> MutualTlsCredentials(const Config& cfg,
                                                              const std::string& dir);

}  // namespace claims_grpc
