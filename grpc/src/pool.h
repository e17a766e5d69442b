// The pool: pool-size worker threads, each owning one libpq connection, take
// calls from one queue. A connection that is not idle after a call (error,
// lost, cancelled) is dropped and opened again for the next call; with a
// multi-host conninfo and target_session_attrs=read-write that reopening
// follows a failover. A connection keeps the statements prepared on it; a
// new one prepares them again. A new connection sets claims.json_output to
// proto3 for its session (nothing but its worker's calls use it).
#pragma once

#include <libpq-fe.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace claims_grpc {

class Conn {
 public:
  explicit Conn(const std::string& conninfo) : conninfo_(conninfo) {}
  ~Conn() { Drop(); }
  // Connect when needed; false with *err when the store is unreachable.
  bool Ensure(std::string* err);
  void Drop();
  PGconn* pg() { return pg_; }
  PGcancel* cancel() { return cancel_; }
  // The name of this connection's prepared statement for key, or "" when
  // it is not prepared yet; Prepared() records one (a new connection has none).
  std::string StatementFor(const std::string& key) const;
  void Prepared(const std::string& key, const std::string& name) { stmts_[key] = name; }
  std::string NextStatementName() { return "claims_grpc_" + std::to_string(next_stmt_++); }

 private:
  bool SetSession(std::string* err);
  std::string conninfo_;
  std::unordered_map<std::string, std::string> stmts_;
  int next_stmt_ = 0;
  PGconn* pg_ = nullptr;
  PGcancel* cancel_ = nullptr;
};

class Pool {
 public:
  using Task = std::function<void(Conn&)>;
  Pool(const std::string& conninfo, int size);
  ~Pool();
  void Submit(Task task);
  // Run what is queued, then stop the workers.
  void Shutdown();

 private:
  void Work(int i);
  std::string conninfo_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace claims_grpc
