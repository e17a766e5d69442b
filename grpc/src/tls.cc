// TLS files of claims-grpc: checks with OpenSSL, private copies, credentials.
#include "tls.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>

namespace claims_grpc {

static bool ReadWhole(const std::string& path, std::string* out, std::string* err) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *err = "cannot read " + path + ": " + strerror(errno);
    return false;
  }
  std::stringstream s;
  s << in.rdbuf();
  *out = s.str();
  return true;
}

static std::string SslError() {
  unsigned long e = ERR_get_error();
  char buf[256];
  ERR_error_string_n(e, buf, sizeof(buf));
  ERR_clear_error();
  return buf;
}

// Count the certificates of a PEM text (0 when none parse).
static int CountCerts(const std::string& pem, X509** first) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int n = 0;
  while (X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    if (n == 0 && first)
      *first = x;
    else
      X509_free(x);
    n++;
  }
  ERR_clear_error();
  BIO_free(bio);
  return n;
}

// The certificate chain, key and CA texts parse and the key is the certificate's.
static bool CheckPem(const std::string& cert, const std::string& key, const std::string& ca,
                     const Config& cfg, std::string* err) {
  X509* leaf = nullptr;
  if (CountCerts(cert, &leaf) == 0) {
    *err = cfg.tls_cert + ": no PEM certificate";
    return false;
  }
  BIO* bio = BIO_new_mem_buf(key.data(), static_cast<int>(key.size()));
  EVP_PKEY* pkey = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  bool ok = true;
  if (!pkey) {
    *err = cfg.tls_key + ": no PEM private key: " + SslError();
    ok = false;
  } else if (X509_check_private_key(leaf, pkey) != 1) {
    *err = cfg.tls_key + " is not the key of " + cfg.tls_cert;
    ERR_clear_error();
    ok = false;
  }
  EVP_PKEY_free(pkey);
  X509_free(leaf);
  if (ok && CountCerts(ca, nullptr) == 0) {
    *err = cfg.client_ca + ": no PEM certificate";
    ok = false;
  }
  return ok;
}

// Write data to dir/name through a temporary file and rename (mode 0600).
static bool WriteAtomically(const std::string& dir, const std::string& name,
                            const std::string& data, std::string* err) {
  std::string tmp = dir + "/." + name + ".tmp", path = dir + "/" + name;
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *err = "cannot write " + tmp + ": " + strerror(errno);
    return false;
  }
  size_t off = 0;
  while (off < data.size()) {
    ssize_t w = write(fd, data.data() + off, data.size() - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      *err = "cannot write " + tmp + ": " + strerror(errno);
      close(fd);
      return false;
    }
    off += static_cast<size_t>(w);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    *err = "cannot write " + path + ": " + strerror(errno);
    return false;
  }
  return true;
}

TlsFiles::~TlsFiles() {
  if (!own_dir_) return;
  for (const char* n : {"key.pem", "cert.pem", "ca.pem"}) unlink((dir_ + "/" + n).c_str());
  rmdir(dir_.c_str());
}

bool TlsFiles::Init(const Config& cfg, std::string* err) {
  cfg_ = cfg;
  std::string base = cfg.runtime_dir;
  if (base.empty() && getenv("RUNTIME_DIRECTORY")) base = getenv("RUNTIME_DIRECTORY");
  if (base.empty()) {
    const char* tmp = getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/claims-grpc.XXXXXX";
    if (!mkdtemp(&templ[0])) {
      *err = "cannot create " + templ + ": " + strerror(errno);
      return false;
    }
    dir_ = templ;
    own_dir_ = true;
  } else {
    dir_ = base;
    if (mkdir(dir_.c_str(), 0700) != 0 && errno != EEXIST) {
      *err = "cannot create " + dir_ + ": " + strerror(errno);
      return false;
    }
  }
  return CheckAndCopy(err);
}

bool TlsFiles::Reload(std::string* err) { return CheckAndCopy(err); }

// The key is written last: the watcher reads key and chain together and a
// key newer than its chain is retried by it on the next tick.
bool TlsFiles::CheckAndCopy(std::string* err) {
  std::string cert, key, ca;
  if (!ReadWhole(cfg_.tls_cert, &cert, err) || !ReadWhole(cfg_.tls_key, &key, err) ||
      !ReadWhole(cfg_.client_ca, &ca, err))
    return false;
  if (!CheckPem(cert, key, ca, cfg_, err)) return false;
  return WriteAtomically(dir_, "ca.pem", ca, err) &&
         WriteAtomically(dir_, "cert.pem", cert, err) &&
         WriteAtomically(dir_, "key.pem", key, err);
}

std::shared_ptr<grpc::ServerCredentials> TlsFiles::Credentials() const {
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      dir_ + "/key.pem", dir_ + "/cert.pem", dir_ + "/ca.pem",
      static_cast<unsigned int>(cfg_.tls_watch_interval_s));
  grpc::experimental::TlsServerCredentialsOptions opts(provider);
  opts.watch_root_certs();
  opts.watch_identity_key_cert_pairs();
  opts.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  return grpc::experimental::TlsServerCredentials(opts);
}

}  // namespace claims_grpc
