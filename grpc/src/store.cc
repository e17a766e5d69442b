// Calls to the store over libpq: connect, run, cancel, map errors.
#include "store.h"

#include <poll.h>

#include <cstring>

#include "log.h"

namespace claims_grpc {

StoreConnection::~StoreConnection() { Discard(); }

// Close the connection; the next call opens a new one.
void StoreConnection::Discard() {
  if (conn_ != nullptr) PQfinish(conn_);
  conn_ = nullptr;
}

// Wait until the socket is ready for reading or writing, or deadline, or
// cancelled; false when not ready.
static bool WaitSocket(PGconn* conn, bool for_write, Clock::time_point deadline,
                       const std::atomic<bool>* cancelled) {
  for (;;) {
    if (cancelled != nullptr && cancelled->load()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p;
    p.fd = PQsocket(conn);
    p.events = for_write ? POLLOUT : POLLIN;
    p.revents = 0;
    int rc = poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 50)));
    if (rc > 0) return true;
    if (rc < 0 && errno != EINTR) return false;
  }
}

// Open the connection (multi-host conninfo: libpq picks the read-write host).
bool StoreConnection::Connect(Clock::time_point deadline, std::string* err) {
  conn_ = PQconnectStart(conninfo_.c_str());
  if (conn_ == nullptr) {
    *err = "out of memory";
    return false;
  }
  PostgresPollingStatusType st = PGRES_POLLING_WRITING;
  while (st != PGRES_POLLING_OK) {
    if (PQstatus(conn_) == CONNECTION_BAD || st == PGRES_POLLING_FAILED) {
      *err = PQerrorMessage(conn_);
      Discard();
      return false;
    }
    if (!WaitSocket(conn_, st == PGRES_POLLING_WRITING, deadline, nullptr)) {
      *err = "connecting to the store timed out";
      Discard();
      return false;
    }
    st = PQconnectPoll(conn_);
  }
  PQsetnonblocking(conn_, 1);
  return true;
}

// Trim the trailing newline libpq leaves on messages.
static std::string Trim(const char* s) {
  std::string m = s ? s : "";
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

SqlResult StoreConnection::Run(const std::string& sql, Clock::time_point deadline,
                               const std::atomic<bool>* cancelled) {
  SqlResult r;
  std::string err;
  if (conn_ != nullptr && PQstatus(conn_) != CONNECTION_OK) Discard();
  if (conn_ == nullptr && !Connect(deadline, &err)) {
    r.lost = true;
    r.message = Trim(err.c_str());
    return r;
  }
  if (!PQsendQuery(conn_, sql.c_str())) {
    r.lost = true;
    r.message = Trim(PQerrorMessage(conn_));
    Discard();
    return r;
  }
  // flush, then read every result
  bool given_up = false;
  while (!given_up) {
    int f = PQflush(conn_);
    if (f == 0) break;
    if (f < 0 || !WaitSocket(conn_, true, deadline, cancelled)) given_up = true;
  }
  while (!given_up) {
    if (!PQconsumeInput(conn_)) break;
    if (!PQisBusy(conn_)) {
      PGresult* res = PQgetResult(conn_);
      if (res == nullptr) break;
      ExecStatusType st = PQresultStatus(res);
      if (st == PGRES_TUPLES_OK) {
        bool null = PQntuples(res) == 0 || PQgetisnull(res, 0, 0);
        r.rows.push_back(null ? "" : PQgetvalue(res, 0, 0));
        r.nulls.push_back(null);
      } else if (st == PGRES_FATAL_ERROR && r.sqlstate.empty() && r.message.empty()) {
        const char* state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
        r.sqlstate = state ? state : "";
        r.message = Trim(PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
        const char* detail = PQresultErrorField(res, PG_DIAG_MESSAGE_DETAIL);
        if (detail != nullptr) r.message += " (" + Trim(detail) + ")";
      }
      PQclear(res);
      continue;
    }
    if (!WaitSocket(conn_, false, deadline, cancelled)) given_up = true;
  }
  if (given_up) {
    // cancel at the store, then drop the connection: its state is unknown
    PGcancel* c = PQgetCancel(conn_);
    if (c != nullptr) {
      char buf[256];
      PQcancel(c, buf, sizeof(buf));
      PQfreeCancel(c);
    }
    Discard();
    r.cancelled = cancelled != nullptr && cancelled->load();
    r.sqlstate = r.cancelled ? "" : "57014";
    r.message = r.cancelled ? "the caller went away" : "the deadline passed";
    return r;
  }
  if (PQstatus(conn_) != CONNECTION_OK) {
    r.lost = true;
    if (r.message.empty()) r.message = Trim(PQerrorMessage(conn_));
    r.sqlstate.clear();
    Discard();
    return r;
  }
  // a connection that is not idle after the call is not trusted again
  if (PQtransactionStatus(conn_) != PQTRANS_IDLE) Discard();
  r.ok = r.sqlstate.empty() && r.message.empty();
  return r;
}

StorePool::StorePool(const std::string& conninfo, int size) {
  for (int i = 0; i < size; i++) conns_.emplace_back(new StoreConnection(conninfo));
  for (int i = 0; i < size; i++) threads_.emplace_back([this, i] { Work(i); });
}

StorePool::~StorePool() { Stop(); }

void StorePool::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
}

// Finish the queued jobs, then end the threads.
void StorePool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

// A worker: take jobs in order, run each on this thread's connection.
void StorePool::Work(int i) {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job(*conns_[i]);
  }
}

grpc::Status StatusFor(const SqlResult& r) {
  using grpc::StatusCode;
  const std::string& s = r.sqlstate;
  StatusCode code = StatusCode::UNKNOWN;
  if (r.cancelled)
    code = StatusCode::CANCELLED;
  else if (r.lost)
    code = StatusCode::UNAVAILABLE;
  else if (s == "23505")
    code = StatusCode::ALREADY_EXISTS;
  else if (s == "55P03" || s == "40001" || s == "40P01")
    code = StatusCode::ABORTED;
  else if (s == "42501" || s.rfind("28", 0) == 0)
    code = StatusCode::PERMISSION_DENIED;
  else if (s == "P0002")
    code = StatusCode::NOT_FOUND;
  else if (s == "55000")
    code = StatusCode::FAILED_PRECONDITION;
  else if (s.rfind("22", 0) == 0)
    code = StatusCode::INVALID_ARGUMENT;
  else if (s == "54000" || s.rfind("53", 0) == 0)
    code = StatusCode::RESOURCE_EXHAUSTED;
  else if (s == "57014")
    code = StatusCode::DEADLINE_EXCEEDED;
  else if (s == "25006" || s.rfind("08", 0) == 0 || s.rfind("57P", 0) == 0)
    code = StatusCode::UNAVAILABLE;
  else if (s == "42883" || s == "42704")
    code = StatusCode::FAILED_PRECONDITION;  // the store lacks claims 1.2
  else
    code = StatusCode::INTERNAL;
  std::string msg = r.message;
  if (!s.empty()) msg = s + ": " + msg;
  return grpc::Status(code, msg);
}

std::string QuoteIdent(const std::string& name) {
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string QuoteLiteral(const std::string& text) {
  std::string out = "E'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += c;
    out += c;
  }
  return out + "'";
}

}  // namespace claims_grpc
