// One call as SQL: two prepared statements sent in one pipeline ending in a
// Sync (one round trip), the settings
//   SELECT set_config('role', r, true), set_config('statement_timeout', N, true)
// (claims.json_output is proto3 for the connection's whole session), then
// SELECT ... of the function, run as one implicit transaction (committed at
// the Sync, rolled back on any error); and the mapping of its
// outcome to a gRPC status. Each statement is parsed once per connection.
#pragma once

#include <grpcpp/support/status.h>

#include <memory>
#include <mutex>
#include <string>

#include "pool.h"

namespace claims_grpc {

// Shared by a call's reactor (OnCancel) and the worker running its SQL.
struct CallState {
  std::mutex mu;
  bool cancelled = false;       // the caller went (cancel, deadline, lost)
  PGcancel* running = nullptr;  // set while this call's SQL runs
  bool cancel_sent = false;
  // Mark the call gone and cancel its SQL if it is running.
  void Cancel();
  bool Gone();
  // Whether a cancel request went to the store for this call.
  bool CancelSent();
};

struct SqlOutcome {
  bool ok = false;
  bool setup_failed = false;  // SET ROLE (or a SET) failed: a configuration error
  bool conn_lost = false;     // no connection, or it broke during the call
  bool skipped = false;       // the caller was gone before the SQL started
  std::string sqlstate, message, detail;
  bool allowed = true;        // the access predicate's value
  bool null = true;           // the function returned NULL
  std::string value;          // its text
};

// Run fn(json) of schema as role. predicate, when not empty, is a boolean SQL
// expression checked first (the function is not called when it is false).
SqlOutcome RunCall(Conn& conn, CallState* st, const std::string& role, int timeout_ms,
                   const std::string& schema, const std::string& fn, const std::string& json,
                   const std::string& predicate);

// The gRPC status of a failed outcome (the store's SQLSTATE, its message).
grpc::Status ToStatus(const SqlOutcome& out, bool caller_cancelled);

}  // namespace claims_grpc
