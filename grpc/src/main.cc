// claims-grpc: serves gitlab.cells.topology_service.claims.v1.ClaimService and
// grpc.health.v1.Health over mTLS, every call as SQL against the claims store.
// SIGTERM/SIGINT stop gracefully; SIGHUP reloads the identity map and TLS files.
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <memory>

#include "config.h"
#include "health.h"
#include "identity_map.h"
#include "log.h"
#include "pool.h"
#include "service.h"
#include "tls.h"

using namespace claims_grpc;

// Reload what SIGHUP reloads; a bad file keeps the previous one.
static void Reload(const Config& cfg, IdentityMap* ids, TlsFiles* tls) {
  std::string err;
  if (ids->Load(cfg.identity_map, &err))
    Log(Level::kInfo, "SIGHUP: identity map reloaded (" + std::to_string(ids->Size()) + " CNs)");
  else
    Log(Level::kError, "SIGHUP: identity map kept: " + err);
  if (tls->Reload(&err))
    Log(Level::kInfo, "SIGHUP: TLS files reloaded");
  else
    Log(Level::kError, "SIGHUP: TLS files kept: " + err);
}

int main(int argc, char** argv) {
  Config cfg;
  std::string msg;
  int status;
  if (!ParseConfig(argc, argv, &cfg, &msg, &status)) {
    (status == 0 ? std::cout : std::cerr) << msg << (msg.back() == '\n' ? "" : "\n");
    return status;
  }
  Level level, call_level;
  if (!ParseLevel(cfg.log_level, &level) || !ParseLevel(cfg.call_log_level, &call_level)) {
    std::cerr << "claims-grpc: log levels are debug, info, warning or error\n";
    return 2;
  }
  SetLogLevel(level);

  // Signals go to the main thread's sigwait only.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGTERM);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);

  IdentityMap ids;
  TlsFiles tls;
  if (!ids.Load(cfg.identity_map, &msg) || !tls.Init(cfg, &msg)) {
    Log(Level::kError, msg);
    return 1;
  }
  Pool pool(cfg.conninfo, cfg.pool_size);
  Health health(cfg.conninfo, cfg.health_interval_ms);
  ClaimServiceImpl service(cfg, &ids, &pool, &health, call_level);
  if (!service.CheckRules(&msg)) {
    Log(Level::kError, msg);
    return 1;
  }

  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(cfg.listen, tls.Credentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    Log(Level::kError, "cannot listen on " + cfg.listen);
    pool.Shutdown();
    return 1;
  }
  health.Start(server->GetHealthCheckService());
  if (!cfg.port_file.empty()) {
    std::string tmp = cfg.port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    rename(tmp.c_str(), cfg.port_file.c_str());
  }
  Log(Level::kInfo, "listening on " + cfg.listen + " (port " + std::to_string(port) +
                        "), pool of " + std::to_string(cfg.pool_size) + ", " +
                        std::to_string(ids.Size()) + " CNs mapped");

  for (;;) {
    int sig = 0;
    if (sigwait(&sigs, &sig) != 0) continue;
    if (sig == SIGHUP) {
      Reload(cfg, &ids, &tls);
      continue;
    }
    Log(Level::kInfo, std::string("stopping on ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT"));
    break;
  }
  health.Stop();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(cfg.shutdown_grace_s));
  pool.Shutdown();
  Log(Level::kInfo, "stopped");
  return 0;
}
