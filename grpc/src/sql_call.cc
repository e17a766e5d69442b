// Running one call's SQL and mapping SQLSTATEs to gRPC status codes.
#include "sql_call.h"

#include <cstring>
#include <map>
#include <vector>

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

// The setup of every call: the caller's role and its time limit, each local
// to the call's transaction (as SET LOCAL would); the output format is the
// connection's (Conn sets claims.json_output = proto3 for the session).
static const char kSetupSql[] =
    "SELECT pg_catalog.set_config('role', $1, true), "
    "pg_catalog.set_config('statement_timeout', $2, true)";

// Queue a Parse of the text sql() gives under the name key has on conn, or a
// new one; the name, and in *parse whether a Parse was queued.
template <typename SqlText>
static std::string QueueStatement(Conn& conn, const std::string& key, SqlText sql, int nparams,
                                  bool* parse) {
  std::string name = conn.StatementFor(key);
  *parse = name.empty();
  if (!*parse) return name;
  name = conn.NextStatementName();
  if (PQsendPrepare(conn.pg(), name.c_str(), sql().c_str(), nparams, nullptr) != 1) return "";
  return name;
}

// The text of the statement calling fn, checking predicate first when given.
static std::string CallSql(PGconn* pg, const std::string& schema, const std::string& fn,
                           const std::string& predicate) {
  std::string call = Quoted(pg, schema, true) + "." + fn + "($1::pg_catalog.jsonb)";
  if (predicate.empty()) return "SELECT true, " + call;
  return "SELECT (" + predicate + "), CASE WHEN " + predicate + " THEN " + call + " END";
}

// Record a failed result as the call's error, unless there is one already.
static void NoteError(SqlOutcome* out, const PGresult* r, bool in_setup) {
  if (!out->sqlstate.empty() || !out->message.empty()) return;
  out->ok = false;
  out->sqlstate = Field(r, PG_DIAG_SQLSTATE);
  out->message = Field(r, PG_DIAG_MESSAGE_PRIMARY);
  out->detail = Field(r, PG_DIAG_MESSAGE_DETAIL);
  if (out->message.empty()) out->message = PQresultErrorMessage(r);
  out->setup_failed = in_setup;
}

// The queued steps of one call, in the order their results come back.
enum class Step { kParseSetup, kSetup, kParseCall, kCall };

// Queue the call's steps in one pipeline ending in a Sync: they run as one
// implicit transaction, committed at the Sync, rolled back on any error.
static bool QueueCall(Conn& conn, const std::string& role, int timeout_ms,
                      const std::string& call_key, const std::string& schema,
                      const std::string& fn, const std::string& predicate,
                      const std::string& json, std::vector<Step>* steps,
                      std::string* setup_name, std::string* call_name) {
  PGconn* pg = conn.pg();
  bool parse;
  if (PQenterPipelineMode(pg) != 1) return false;
  *setup_name =
      QueueStatement(conn, "\x01setup", [] { return std::string(kSetupSql); }, 2, &parse);
  if (setup_name->empty()) return false;
  if (parse) steps->push_back(Step::kParseSetup);
  std::string timeout = std::to_string(timeout_ms);
  const char* sp[2] = {role.c_str(), timeout.c_str()};
  if (PQsendQueryPrepared(pg, setup_name->c_str(), 2, sp, nullptr, nullptr, 0) != 1) return false;
  steps->push_back(Step::kSetup);
  // Parsed after the setup, so as the caller's role, as before.
  *call_name = QueueStatement(
      conn, call_key, [&] { return CallSql(pg, schema, fn, predicate); }, 1, &parse);
  if (call_name->empty()) return false;
  if (parse) steps->push_back(Step::kParseCall);
  const char* cp[1] = {json.c_str()};
  if (PQsendQueryPrepared(pg, call_name->c_str(), 1, cp, nullptr, nullptr, 0) != 1) return false;
  steps->push_back(Step::kCall);
  return PQpipelineSync(pg) == 1;
}

// Read the results of the queued steps and the Sync into *out.
static void ReadCall(Conn& conn, const std::vector<Step>& steps, const std::string& setup_name,
                     const std::string& call_key, const std::string& call_name,
                     SqlOutcome* out) {
  PGconn* pg = conn.pg();
  std::vector<std::string> parsed;
  for (Step step : steps) {
    while (PGresult* r = PQgetResult(pg)) {
      ExecStatusType s = PQresultStatus(r);
      if (s == PGRES_COMMAND_OK && step == Step::kParseSetup) {
        conn.Prepared("\x01setup", setup_name);
      } else if (s == PGRES_COMMAND_OK && step == Step::kParseCall) {
        conn.Prepared(call_key, call_name);
      } else if (s == PGRES_TUPLES_OK && step == Step::kSetup) {
        // the settings are made
      } else if (s == PGRES_TUPLES_OK && step == Step::kCall && PQntuples(r) == 1) {
        out->ok = true;
        out->allowed = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
        out->null = PQgetisnull(r, 0, 1);
        if (!out->null) out->value = PQgetvalue(r, 0, 1);
      } else if (s != PGRES_PIPELINE_ABORTED) {
        NoteError(out, r, step == Step::kParseSetup || step == Step::kSetup);
      }
      PQclear(r);
    }
    if (PQstatus(pg) != CONNECTION_OK) return;
  }
  // The Sync's own result; then the connection is idle again.
  if (PGresult* r = PQgetResult(pg)) {
    if (PQresultStatus(r) != PGRES_PIPELINE_SYNC) NoteError(out, r, false);
    PQclear(r);
  }
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
  std::string call_key = fn + "\x01" + predicate;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->cancelled) {
      out.skipped = true;
      return out;
    }
    st->running = conn.cancel();
  }
  std::vector<Step> steps;
  std::string setup_name, call_name;
  bool sent = QueueCall(conn, role, timeout_ms, call_key, schema, fn, predicate, json, &steps,
                        &setup_name, &call_name);
  if (sent) ReadCall(conn, steps, setup_name, call_key, call_name, &out);
  if (sent && PQstatus(pg) == CONNECTION_OK) sent = PQexitPipelineMode(pg) == 1;
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
  // as any connection not idle after the call, and one whose cached plan
  // the store refused (its statements are prepared again on a new one).
  if (cancel_sent || !out.ok || PQtransactionStatus(pg) != PQTRANS_IDLE) {
    if (cancel_sent || out.conn_lost || PQtransactionStatus(pg) != PQTRANS_IDLE ||
        out.sqlstate == "25006" || out.sqlstate.rfind("57P", 0) == 0 ||
        out.sqlstate == "0A000")
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
