// Settings of claims-grpc: command-line flags and an optional file with the
// same keys ("key value" or "key = value" lines, # comments); flags win.
#pragma once

#include <string>

namespace claims_grpc {

struct Config {
  std::string listen;                 // HOST:PORT (port 0: any free port)
  std::string conninfo;               // libpq connection string of the store
  std::string tls_cert;               // server certificate chain (PEM)
  std::string tls_key;                // its private key (PEM)
  std::string client_ca;              // CA that signs client certificates
  std::string identity_map;           // lines "CN role"
  std::string schema = "public";      // the claims extension's schema
  std::string port_file;              // where to write the bound port
  std::string runtime_dir;            // private copies of the TLS files
  std::string log_level = "info";     // threshold of all log lines
  std::string call_log_level = "info";  // level of the one line per call
  int pool_size = 8;                  // libpq connections (and SQL threads)
  int default_timeout_ms = 30000;     // statement_timeout when the caller sets no deadline
  int rollback_timeout_ms = 5000;     // statement_timeout of a departed caller's rollback
  int health_interval_ms = 2000;      // how often health checks the store
  int tls_watch_interval_s = 1;       // how often the TLS copies are re-read
  int shutdown_grace_s = 10;          // SIGTERM: time left to running calls
};

// Fill cfg from argv (and --config FILE). On error or --help, returns false
// with the text to print in *msg (exit status 0 for --help/--version).
bool ParseConfig(int argc, char** argv, Config* cfg, std::string* msg, int* exit_status);

}  // namespace claims_grpc
