// Running one call's SQL and mapping SQLSTATEs to gRPC status codes.
#include "sql_call.h"

#include <cstring>
#include <map>

namespace claims_grpc {

void CallState::Cancel() {
  std::lock_guard<std::mutex> lock(mu);
  cancelled = true;
  if (running && !cancel_sent) {
    char err[256];
    PQcancel(running, err, sizeof(err));
    cancel_sent = true;
  }
}

bool CallState::CancelSent() {
  std::lock_guard<std::mutex> lock(mu);
  return cancel_sent;
}

bool CallState::Gone() {
  std::lock_guard<std::mutex> lock(mu);
  return cancelled;
}

static std::string Quoted(PGconn* pg, const std::string& s, bool ident) {
  char* q = ident ? PQescapeIdentifier(pg, s.data(), s.size())
                  : PQescapeLiteral(pg, s.data(), s.size());
  if (!q) return "";
  std::string out(q);
  PQfreemem(q);
  return out;
}

static std::string Field(const PGresult* r, int code) {
  const char* v = PQresultErrorField(r, code);
  return v ? v : "";
}

SqlOutcome RunCall(Conn& conn, CallState* st, const std::string& role, int timeout_ms,
                   const std::string& schema, const std::string& fn, const std::string& json,
                   const std::string& predicate) {
  SqlOutcome out;
  std::string err;
  if (!conn.Ensure(&err)) {
    out.conn_lost = true;
    out.message = "store unreachable: " + err;
    return out;
  }
  PGconn* pg = conn.pg();
  std::string call = Quoted(pg, schema, true) + "." + fn + "(" + Quoted(pg, json, false) +
                     "::pg_catalog.jsonb)";
  std::string sql = "SET LOCAL ROLE " + Quoted(pg, role, true) +
                    "; SET LOCAL statement_timeout = " + std::to_string(timeout_ms) +
                    "; SET LOCAL claims.json_output = 'proto3'; SELECT ";
  if (predicate.empty())
    sql += "true, " + call;
  else
    sql += "(" + predicate + "), CASE WHEN " + predicate + " THEN " + call + " END";
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->cancelled) {
      out.skipped = true;
      return out;
    }
    st->running = conn.cancel();
  }
  int sets_done = 0;
  bool sent = PQsendQuery(pg, sql.c_str()) == 1;
  if (sent) {
    while (PGresult* r = PQgetResult(pg)) {
      ExecStatusType s = PQresultStatus(r);
      if (s == PGRES_COMMAND_OK) {
        sets_done++;
      } else if (s == PGRES_TUPLES_OK && PQntuples(r) == 1) {
        out.ok = true;
        out.allowed = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        out.null = PQgetisnull(r, 0, 1);
        if (!out.null) out.value = PQgetvalue(r, 0, 1);
      } else if (out.sqlstate.empty() && out.message.empty()) {
        out.ok = false;
        out.sqlstate = Field(r, PG_DIAG_SQLSTATE);
        out.message = Field(r, PG_DIAG_MESSAGE_PRIMARY);
        out.detail = Field(r, PG_DIAG_MESSAGE_DETAIL);
        if (out.message.empty()) out.message = PQresultErrorMessage(r);
        out.setup_failed = sets_done == 0;
      }
      PQclear(r);
    }
  }
  bool cancel_sent;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    st->running = nullptr;
    cancel_sent = st->cancel_sent;
  }
  if (!sent || PQstatus(pg) != CONNECTION_OK) {
    out.ok = false;
    out.conn_lost = true;
    if (out.message.empty()) out.message = PQerrorMessage(pg);
    while (!out.message.empty() && out.message.back() == '\n') out.message.pop_back();
  }
  // A cancel request may land on a later query of this connection: drop it,
  // as any connection not idle after the call.
  if (cancel_sent || !out.ok || PQtransactionStatus(pg) != PQTRANS_IDLE) {
    if (cancel_sent || out.conn_lost || PQtransactionStatus(pg) != PQTRANS_IDLE ||
        out.sqlstate == "25006" || out.sqlstate.rfind("57P", 0) == 0)
      conn.Drop();
  }
  return out;
}

grpc::Status ToStatus(const SqlOutcome& out, bool caller_cancelled) {
  using grpc::StatusCode;
  static const std::map<std::string, StatusCode> codes = {
      {"23505", StatusCode::ALREADY_EXISTS},     {"55P03", StatusCode::ABORTED},
      {"P0002", StatusCode::NOT_FOUND},          {"42501", StatusCode::PERMISSION_DENIED},
      {"55000", StatusCode::FAILED_PRECONDITION}, {"22023", StatusCode::INVALID_ARGUMENT},
      {"40001", StatusCode::ABORTED},            {"40P01", StatusCode::ABORTED},
      {"22004", StatusCode::INVALID_ARGUMENT},   {"22P02", StatusCode::INVALID_ARGUMENT},
      {"54000", StatusCode::RESOURCE_EXHAUSTED}, {"25006", StatusCode::UNAVAILABLE},
      {"57014", StatusCode::DEADLINE_EXCEEDED},  {"42883", StatusCode::UNIMPLEMENTED},
      {"53300", StatusCode::UNAVAILABLE},        {"57P01", StatusCode::UNAVAILABLE},
      {"57P02", StatusCode::UNAVAILABLE},        {"57P03", StatusCode::UNAVAILABLE},
  };
  std::string msg = out.message;
  if (!out.detail.empty()) msg += " (" + out.detail + ")";
  if (out.conn_lost && out.sqlstate.empty()) return grpc::Status(StatusCode::UNAVAILABLE, msg);
  // only a refused SET ROLE is the identity's fault; a shutdown is not
  if (out.setup_failed &&
      (out.sqlstate == "42501" || out.sqlstate == "22023" || out.sqlstate == "42704"))
    return grpc::Status(StatusCode::PERMISSION_DENIED,
                        "the caller's role cannot be assumed: " + msg);
  // a statement timeout is the deadline unless the caller cancelled first
  if (out.sqlstate == "57014" && caller_cancelled)
    return grpc::Status(StatusCode::CANCELLED, msg);
  auto it = codes.find(out.sqlstate);
  if (it != codes.end()) return grpc::Status(it->second, msg);
  // Class 22 (data exception) is bad input; class 08 a lost connection.
  if (out.sqlstate.rfind("22", 0) == 0) return grpc::Status(StatusCode::INVALID_ARGUMENT, msg);
  if (out.sqlstate.rfind("08", 0) == 0) return grpc::Status(StatusCode::UNAVAILABLE, msg);
  return grpc::Status(StatusCode::INTERNAL, msg + " (SQLSTATE " + out.sqlstate + ")");
}

}  // namespace claims_grpc
