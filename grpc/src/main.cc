// claims-grpc: GitLab's claims.v1 ClaimService in front of a claims store.
// Signals: SIGTERM/SIGINT stop gracefully, SIGHUP reloads the identity map
// and the TLS files.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

#include "config.h"
#include "health.h"
#include "identity_map.h"
#include "log.h"
#include "service.h"
#include "store.h"
#include "tls.h"

using namespace claims_grpc;

// The directory of the TLS copies: --runtime-dir, $RUNTIME_DIRECTORY (systemd),
// else a new one under $TMPDIR; *created says whether to remove it at exit.
static std::string RuntimeDir(const Config& cfg, bool* created) {
  *created = false;
  if (!cfg.runtime_dir.empty()) return cfg.runtime_dir;
  const char* rd = getenv("RUNTIME_DIRECTORY");
  if (rd != nullptr && *rd != '\0') return rd;
  const char* tmp = getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/claims-grpc.XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) return "";
  *created = true;
  return buf.data();
}

// Reload the identity map and the TLS files; keep the old ones on error.
static void Reload(const Config& cfg, IdentityMap* map, const std::string& dir) {
  std::string err;
  if (map->Load(cfg.identity_map, &err))
    Log(Level::kInfo, "reloaded the identity map: " + std::to_string(map->Size()) + " CNs");
  else
    Log(Level::kError, err + "; keeping the previous identity map");
  if (CopyTlsFiles(cfg, dir, &err))
    Log(Level::kInfo, "reloaded the TLS files");
  else
    Log(Level::kError, err + "; keeping the previous TLS files");
}

int main(int argc, char** argv) {
  Config cfg;
  std::string msg;
  int exit_status = 2;
  if (!ParseConfig(argc, argv, &cfg, &msg, &exit_status)) {
    (exit_status == 0 ? std::cout : std::cerr) << msg;
    return exit_status;
  }
  Level level;
  if (!ParseLevel(cfg.log_level, &level) || !ParseLevel(cfg.call_log_level, &level)) {
    std::cerr << "claims-grpc: unknown log level\n";
    return 2;
  }
  ParseLevel(cfg.log_level, &level);
  SetLogLevel(level);

  // signals are taken by sigwait in this thread only
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);

  IdentityMap map;
  std::string err;
  if (!map.Load(cfg.identity_map, &err)) {
    Log(Level::kError, err);
    return 1;
  }
  bool created = false;
  std::string dir = RuntimeDir(cfg, &created);
  if (dir.empty() || !CopyTlsFiles(cfg, dir, &err)) {
    Log(Level::kError, dir.empty() ? "cannot create a runtime directory" : err);
    return 1;
  }

  StorePool pool(cfg.conninfo, cfg.pool_size);
  ClaimServiceImpl service(cfg, &map, &pool);
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(cfg.listen, MutualTlsCredentials(cfg, dir), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    Log(Level::kError, "cannot listen on " + cfg.listen);
    return 1;
  }
  if (!cfg.port_file.empty()) {
    std::ofstream pf(cfg.port_file + ".tmp");
    pf << port << "\n";
    pf.close();
    rename((cfg.port_file + ".tmp").c_str(), cfg.port_file.c_str());
  }
  HealthChecker health(cfg, server->GetHealthCheckService());
  Log(Level::kInfo, "listening on " + cfg.listen + " (port " + std::to_string(port) + "), " +
                        std::to_string(map.Size()) + " CNs in the identity map, pool of " +
                        std::to_string(cfg.pool_size));

  for (;;) {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Reload(cfg, &map, dir);
      continue;
    }
    break;
  }
  Log(Level::kInfo, "stopping: calls in progress get " + std::to_string(cfg.shutdown_grace_s) +
                        " s");
  server->GetHealthCheckService()->SetServingStatus(false);
  health.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(cfg.shutdown_grace_s));
  server->Wait();
  pool.Stop();
  if (created) {
    for (const char* f : {"server.key", "server.crt", "client-ca.crt"})
      unlink((dir + "/" + f).c_str());
    rmdir(dir.c_str());
  }
  Log(Level::kInfo, "stopped");
  return 0;
}
