// Worker threads and their libpq connections.
#include "pool.h"

namespace claims_grpc {

bool Conn::Ensure(std::string* err) {
  if (pg_ && PQstatus(pg_) == CONNECTION_OK && PQtransactionStatus(pg_) == PQTRANS_IDLE)
    return true;
  Drop();
  pg_ = PQconnectdb(conninfo_.c_str());
  if (PQstatus(pg_) != CONNECTION_OK) {
    *err = PQerrorMessage(pg_);
    while (!err->empty() && err->back() == '\n') err->pop_back();
    Drop();
    return false;
  }
  if (!SetSession(err)) {
    Drop();
    return false;
  }
  cancel_ = PQgetCancel(pg_);
  return true;
}

// The settings every call of this connection wants, made once for the
// session: the gateway alone uses the connection, and always wants proto3.
bool Conn::SetSession(std::string* err) {
  PGresult* r = PQexec(pg_, "SELECT pg_catalog.set_config('claims.json_output', 'proto3', false)");
  bool ok = PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) {
    *err = PQresultErrorMessage(r);
    while (!err->empty() && err->back() == '\n') err->pop_back();
  }
  PQclear(r);
  return ok;
}

std::string Conn::StatementFor(const std::string& key) const {
  auto it = stmts_.find(key);
  return it == stmts_.end() ? "" : it->second;
}

void Conn::Drop() {
  stmts_.clear();
  next_stmt_ = 0;
  if (cancel_) PQfreeCancel(cancel_);
  if (pg_) PQfinish(pg_);
  cancel_ = nullptr;
  pg_ = nullptr;
}

Pool::Pool(const std::string& conninfo, int size) : conninfo_(conninfo) {
  for (int i = 0; i < size; i++) threads_.emplace_back(&Pool::Work, this, i);
}

Pool::~Pool() { Shutdown(); }

void Pool::Submit(Task task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void Pool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
}

void Pool::Work(int) {
  Conn conn(conninfo_);
  for (;;) {
    Task task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task(conn);
  }
}

}  // namespace claims_grpc
