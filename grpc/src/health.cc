// The health checker thread.
#include "health.h"

#include <libpq-fe.h>

#include <chrono>
#include <cstring>

#include "log.h"

namespace claims_grpc {

static const char* kService = "gitlab.cells.topology_service.claims.v1.ClaimService";

void Health::Start(grpc::HealthCheckServiceInterface* svc) {
  svc_ = svc;
  Set(false);
  thread_ = std::thread(&Health::Loop, this);
}

void Health::Poke() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    poked_ = true;
  }
  cv_.notify_all();
}

void Health::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (svc_) svc_->Shutdown();
}

void Health::Set(bool serving) {
  if (serving_ == static_cast<int>(serving)) return;
  serving_ = serving;
  svc_->SetServingStatus("", serving);
  svc_->SetServingStatus(kService, serving);
  Log(serving ? Level::kInfo : Level::kWarning,
      std::string("health: ") + (serving ? "SERVING (the store's primary is reachable)"
                                         : "NOT_SERVING (no primary reachable)"));
}

void Health::Loop() {
  PGconn* pg = nullptr;
  for (;;) {
    bool primary = false;
    if (!pg || PQstatus(pg) != CONNECTION_OK) {
      if (pg) PQfinish(pg);
      pg = PQconnectdb(conninfo_.c_str());
    }
    if (PQstatus(pg) == CONNECTION_OK) {
      PGresult* r = PQexec(pg, "SELECT pg_catalog.pg_is_in_recovery()");
      primary = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                strcmp(PQgetvalue(r, 0, 0), "f") == 0;
      PQclear(r);
      if (!primary) {
        PQfinish(pg);  // reconnect: target_session_attrs picks the new primary
        pg = nullptr;
      }
    }
    Set(primary);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(primary ? interval_ms_ : std::min(interval_ms_, 500)),
                 [this] { return stopping_ || poked_; });
    if (stopping_) break;
    poked_ = false;
  }
  if (pg) PQfinish(pg);
  Set(false);
}

}  // namespace claims_grpc
