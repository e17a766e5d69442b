// The store's side: libpq connections in a pool of worker threads, one
// transaction per call, and the SQLSTATE -> gRPC status mapping.
#pragma once

#include <grpcpp/support/status.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace claims_grpc {

using Clock = std::chrono::system_clock;

// The outcome of one SQL call.
struct SqlResult {
  bool ok = false;
  bool lost = false;               // no answer: connection lost or refused
  bool cancelled = false;          // given up because the caller went away
  std::vector<std::string> rows;   // first column of each result's first row ("" for NULL)
  std::vector<bool> nulls;         // whether that value was NULL
  std::string sqlstate;
  std::string message;
};

// One libpq connection, opened on first use and after a failure.
class StoreConnection {
 public:
  explicit StoreConnection(std::string conninfo) : conninfo_(std::move(conninfo)) {}
  ~StoreConnection();
  // Run one simple-query string (one implicit transaction) until deadline;
  // when *cancelled becomes true, cancel it at the store.
  SqlResult Run(const std::string& sql, Clock::time_point deadline,
                const std::atomic<bool>* cancelled);
  void Discard();

 private:
  bool Connect(Clock::time_point deadline, std::string* err);
  std::string conninfo_;
  PGconn* conn_ = nullptr;
};

// Worker threads, each owning one StoreConnection; jobs run in order.
class StorePool {
 public:
  using Job = std::function<void(StoreConnection&)>;
  StorePool(const std::string& conninfo, int size);
  ~StorePool();
  void Submit(Job job);
  void Stop();

 private:
  void Work(int i);
  std::vector<std::unique_ptr<StoreConnection>> conns_;
  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  bool stopping_ = false;
};

// The gRPC status for a failed SqlResult.
grpc::Status StatusFor(const SqlResult& r);
// "name" quoted as an SQL identifier, 'text' as a literal.
std::string QuoteIdent(const std::string& name);
std::string QuoteLiteral(const std::string& text);

}  // namespace claims_grpc
