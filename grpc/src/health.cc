// The health checker: a connection of its own asks the store whether it is
// a primary, every health-interval-ms.
#include "health.h"

#include "log.h"
#include "store.h"

namespace claims_grpc {

HealthChecker::HealthChecker(const Config& cfg, grpc::HealthCheckServiceInterface* health)
    : cfg_(cfg), health_(health) {
  health_->SetServingStatus(false);
  thread_ = std::thread([this] { Loop(); });
}

HealthChecker::~HealthChecker() { Stop(); }

void HealthChecker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Check, set the status, wait, again; log each change.
void HealthChecker::Loop() {
  StoreConnection conn(cfg_.conninfo);
  int last = -1;
  for (;;) {
    auto timeout = std::chrono::milliseconds(std::max(cfg_.health_interval_ms, 1000));
    SqlResult r = conn.Run("SELECT pg_catalog.pg_is_in_recovery()::text", Clock::now() + timeout,
                           nullptr);
    bool serving = r.ok && r.rows.size() == 1 && r.rows[0] == "false";
    if (!r.ok) conn.Discard();
    health_->SetServingStatus(serving);
    if (static_cast<int>(serving) != last) {
      Log(serving ? Level::kInfo : Level::kWarning,
          serving ? std::string("health: SERVING (the store accepts writes)")
                  : "health: NOT_SERVING (" +
                        (r.ok ? std::string("the store is in recovery") : r.message) + ")");
      last = serving;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::milliseconds(cfg_.health_interval_ms),
                     [this] { return stopping_; }))
      return;
  }
}

}  // namespace claims_grpc
