// grpc.health.v1.Health: SERVING only while a connection made with the
// store's conninfo reaches a primary (pg_is_in_recovery() is false); checked
// every health-interval-ms and at once when a call loses its connection.
#pragma once

#include <grpcpp/health_check_service_interface.h>

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace claims_grpc {

class Health {
 public:
  Health(const std::string& conninfo, int interval_ms) : conninfo_(conninfo), interval_ms_(interval_ms) {}
  void Start(grpc::HealthCheckServiceInterface* svc);
  // Check again now (a call lost its connection or met a standby).
  void Poke();
  // NOT_SERVING from now on (shutdown), and stop the checker.
  void Stop();

 private:
  void Loop();
  void Set(bool serving);
  std::string conninfo_;
  int interval_ms_;
  grpc::HealthCheckServiceInterface* svc_ = nullptr;
  std::mutex mu_;
  std::condition_variable cv_;
  bool poked_ = false, stopping_ = false;
  int serving_ = -1;
  std::thread thread_;
};

}  // namespace claims_grpc
