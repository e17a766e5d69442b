// grpc.health.v1: SERVING only while the store's primary is reachable.
#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "config.h"

namespace claims_grpc {

class HealthChecker {
 public:
  HealthChecker(const Config& cfg, grpc::HealthCheckServiceInterface* health);
  ~HealthChecker();
  void Stop();

 private:
  void Loop();
  const Config& cfg_;
  grpc::HealthCheckServiceInterface* health_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace claims_grpc
