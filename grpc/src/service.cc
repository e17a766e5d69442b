// ClaimService over the store: identity, access rules, SQL, deadlines and
// the rollback of leases whose caller went away.
#include "service.h"

#include <google/protobuf/util/json_util.h>

#include <atomic>
#include <memory>

#include "log.h"
#include "proto/autz.pb.h"

namespace claims_grpc {

namespace pbu = google::protobuf::util;
using grpc::Status;
using grpc::StatusCode;

static const char* kCodeNames[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

// One call in flight: knows when its caller went away and, for BeginUpdate,
// the lease to roll back if the reply was never delivered.
class Call : public grpc::ServerUnaryReactor {
 public:
  Call(ClaimServiceImpl* svc, grpc::CallbackServerContext* ctx, const char* method,
       std::string cn)
      : svc_(svc), ctx_(ctx), method_(method), cn_(std::move(cn)), start_(Clock::now()) {}

  void OnCancel() override { cancelled_ = true; }

  void OnDone() override {
    // IsCancelled() is final here: the caller never got the status
    if (!lease_.empty() && ctx_->IsCancelled()) {
      Log(Level::kWarning, std::string(method_) + " by \"" + cn_ +
                               "\": the reply was not delivered; rolling lease " + lease_ +
                               " back");
      svc_->RollbackDeparted(role_, cell_id_, lease_);
    }
    delete this;
  }

  // Finish with status, logging the call.
  void Done(const Status& st, Level level) {
    auto ms = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start_)
                  .count() / 1000.0;
    char dur[32];
    snprintf(dur, sizeof(dur), "%.1f", ms);
    std::string line = std::string("call ") + method_ + " cn=\"" + cn_ + "\" role=\"" + role_ +
                       "\" status=" + kCodeNames[st.error_code()] + " ms=" + dur;
    if (!st.ok()) line += " message=\"" + st.error_message() + "\"";
    Log(st.ok() ? level : std::max(level, Level::kInfo), line);
    Finish(st);
  }

  ClaimServiceImpl* svc_;
  grpc::CallbackServerContext* ctx_;
  const char* method_;
  std::string cn_;
  std::string role_;
  std::string cell_id_;
  std::string lease_;
  Clock::time_point start_;
  std::atomic<bool> cancelled_{false};
};

ClaimServiceImpl::ClaimServiceImpl(const Config& cfg, IdentityMap* map, StorePool* pool)
    : cfg_(cfg), map_(map), pool_(pool) {
  // the access rules are the methods' access_control options
  const auto* svc = v1::ClaimService::service_full_name();
  const auto* desc =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(svc);
  for (int i = 0; desc != nullptr && i < desc->method_count(); i++) {
    const auto* m = desc->method(i);
    const auto& ac = m->options().GetExtension(ts::access_control);
    bool admin = false, other = false;
    for (int r : ac.authorization_rules()) {
      if (r == ts::RULE_ALLOW_ANY_ADMIN)
        admin = true;
      else
        other = true;
    }
    admin_only_[m->name()] = admin && !other;
  }
}

// The CN of the caller's verified certificate, or "".
static std::string CallerCN(grpc::CallbackServerContext* ctx) {
  auto auth = ctx->auth_context();
  if (!auth) return "";
  auto v = auth->FindPropertyValues("x509_common_name");
  if (v.empty()) return "";
  return std::string(v[0].data(), v[0].size());
}

// The deadline of the SQL: the caller's, or default_timeout_ms.
static Clock::time_point SqlDeadline(grpc::CallbackServerContext* ctx, int default_ms) {
  auto d = ctx->deadline();
  auto fallback = Clock::now() + std::chrono::milliseconds(default_ms);
  return d < fallback ? d : fallback;
}

grpc::ServerUnaryReactor* ClaimServiceImpl::Serve(const char* method,
                                                  grpc::CallbackServerContext* ctx,
                                                  const google::protobuf::Message& req,
                                                  google::protobuf::Message* resp,
                                                  const std::string& fn) {
  auto* call = new Call(this, ctx, method, CallerCN(ctx));
  call->role_ = call->cn_.empty() ? "" : map_->RoleFor(call->cn_);
  if (call->role_.empty()) {
    call->Done(Status(StatusCode::UNAUTHENTICATED,
                      call->cn_.empty() ? "no client certificate"
                                        : "certificate CN \"" + call->cn_ +
                                              "\" is not in the identity map"),
               Level::kInfo);
    return call;
  }
  std::string json;
  pbu::JsonPrintOptions po;
  po.preserve_proto_field_names = true;
  auto js = pbu::MessageToJsonString(req, &json, po);
  if (!js.ok()) {
    call->Done(Status(StatusCode::INVALID_ARGUMENT, "invalid request: " + js.ToString()),
               Level::kInfo);
    return call;
  }
  bool admin_only = admin_only_[method];
  bool begin = fn == "claims_begin_update";
  auto deadline = SqlDeadline(ctx, cfg_.default_timeout_ms);
  long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                     .count();
  if (ms < 1) ms = 1;
  std::string sql = "SET LOCAL ROLE " + QuoteIdent(call->role_) +
                    "; SET LOCAL statement_timeout = " + std::to_string(ms) +
                    "; SET LOCAL claims.json_output = 'proto3'; ";
  if (admin_only) sql += "SELECT pg_catalog.pg_has_role('claims_admin', 'MEMBER')::text; ";
  sql += "SELECT " + QuoteIdent(cfg_.schema) + "." + fn + "(" + QuoteLiteral(json) +
         "::jsonb)::text";
  Level level = Level::kInfo;
  Log(Level::kDebug, std::string(method) + " sql: " + sql);
  (void)ParseLevel(cfg_.call_log_level, &level);
  pool_->Submit([this, call, sql, resp, admin_only, begin, deadline,
                 level](StoreConnection& conn) {
    if (call->cancelled_) {
      call->Done(Status(StatusCode::CANCELLED, "the caller went away"), level);
      return;
    }
    SqlResult r = conn.Run(sql, deadline + std::chrono::seconds(1), &call->cancelled_);
    if (!r.ok) {
      call->Done(StatusFor(r), level);
      return;
    }
    size_t want = admin_only ? 2 : 1;
    if (r.rows.size() != want) {
      call->Done(Status(StatusCode::INTERNAL, "unexpected answer from the store"), level);
      return;
    }
    if (admin_only && r.rows[0] != "true") {
      call->Done(Status(StatusCode::PERMISSION_DENIED,
                        "only administrators (members of claims_admin) may call this"),
                 level);
      return;
    }
    if (r.nulls.back()) {
      call->Done(Status(StatusCode::NOT_FOUND, "the value is not claimed"), level);
      return;
    }
    auto ps = pbu::JsonStringToMessage(r.rows.back(), resp);
    if (!ps.ok()) {
      call->Done(Status(StatusCode::INTERNAL, "cannot read the store's answer: " + ps.ToString()),
                 level);
      return;
    }
    if (begin) {
      auto* b = static_cast<v1::BeginUpdateResponse*>(resp);
      std::string lease = b->lease_uuid().value();
      std::string cell = std::to_string(b->cell_id());
      // the lease exists now; a caller already gone can never learn its uuid
      if (call->cancelled_ || Clock::now() >= deadline) {
        bool late = !call->cancelled_;
        Log(Level::kWarning, std::string("BeginUpdate by \"") + call->cn_ +
                                 "\": the caller went away; rolling lease " + lease + " back");
        RollbackOn(conn, call->role_, cell, lease);
        call->Done(Status(late ? StatusCode::DEADLINE_EXCEEDED : StatusCode::CANCELLED,
                          "the caller went away before the lease was returned; it was rolled back"),
                   level);
        return;
      }
      call->cell_id_ = cell;
      call->lease_ = lease;
    }
    call->Done(Status::OK, level);
  });
  return call;
}

// Roll a lease back on conn as role.
void ClaimServiceImpl::RollbackOn(StoreConnection& conn, const std::string& role,
                                  const std::string& cell_id, const std::string& lease) {
  std::string req = "{\"cell_id\": \"" + cell_id + "\", \"lease_uuid\": {\"value\": \"" + lease +
                    "\"}}";
  std::string sql = "SET LOCAL ROLE " + QuoteIdent(role) +
                    "; SET LOCAL statement_timeout = " + std::to_string(cfg_.rollback_timeout_ms) +
                    "; SELECT " + QuoteIdent(cfg_.schema) + ".claims_rollback(" +
                    QuoteLiteral(req) + "::jsonb)::text";
  SqlResult r = conn.Run(
      sql, Clock::now() + std::chrono::milliseconds(cfg_.rollback_timeout_ms + 1000), nullptr);
  if (!r.ok)
    Log(Level::kError, "could not roll back lease " + lease + " of cell " + cell_id + ": " +
                           StatusFor(r).error_message() +
                           "; the cell's reconciliation will find it");
}

void ClaimServiceImpl::RollbackDeparted(const std::string& role, const std::string& cell_id,
                                        const std::string& lease) {
  pool_->Submit([this, role, cell_id, lease](StoreConnection& conn) {
    RollbackOn(conn, role, cell_id, lease);
  });
}

grpc::ServerUnaryReactor* ClaimServiceImpl::GetCells(grpc::CallbackServerContext* ctx,
                                                     const ts::GetCellsRequest* req,
                                                     ts::GetCellsResponse* resp) {
  return Serve("GetCells", ctx, *req, resp, "claims_get_cells");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::GetRecord(grpc::CallbackServerContext* ctx,
                                                      const v1::GetRecordRequest* req,
                                                      v1::GetRecordResponse* resp) {
  return Serve("GetRecord", ctx, *req, resp, "claims_get_record");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::BeginUpdate(grpc::CallbackServerContext* ctx,
                                                        const v1::BeginUpdateRequest* req,
                                                        v1::BeginUpdateResponse* resp) {
  return Serve("BeginUpdate", ctx, *req, resp, "claims_begin_update");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::CommitUpdate(grpc::CallbackServerContext* ctx,
                                                         const v1::CommitUpdateRequest* req,
                                                         v1::CommitUpdateResponse* resp) {
  return Serve("CommitUpdate", ctx, *req, resp, "claims_commit");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::RollbackUpdate(grpc::CallbackServerContext* ctx,
                                                           const v1::RollbackUpdateRequest* req,
                                                           v1::RollbackUpdateResponse* resp) {
  return Serve("RollbackUpdate", ctx, *req, resp, "claims_rollback");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::ListLeases(grpc::CallbackServerContext* ctx,
                                                       const v1::ListLeasesRequest* req,
                                                       v1::ListLeasesResponse* resp) {
  return Serve("ListLeases", ctx, *req, resp, "claims_list_leases");
}

grpc::ServerUnaryReactor* ClaimServiceImpl::ListRecords(grpc::CallbackServerContext* ctx,
                                                        const v1::ListRecordsRequest* req,
                                                        v1::ListRecordsResponse* resp) {
  return Serve("ListRecords", ctx, *req, resp, "claims_list_records");
}

}  // namespace claims_grpc
