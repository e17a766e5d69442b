// The ClaimService calls: one reactor per call, SQL on the pool.
#include "service.h"

#include <openssl/rand.h>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include "access.h"
#include "sql_call.h"

namespace claims_grpc {

namespace pb = google::protobuf;
using Clock = std::chrono::system_clock;

static const char* kCodeNames[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

static const pb::ServiceDescriptor* ServiceDescriptor() {
  return pb::DescriptorPool::generated_pool()->FindServiceByName(
      v1::ClaimService::service_full_name());
}

// Roll back a lease whose caller can never learn its uuid (a fresh call state:
// nothing cancels it); one retry on a lost connection.
static void RollbackLease(ClaimServiceImpl* svc, Conn& conn, const std::string& role,
                          const std::string& cell_id, const std::string& lease,
                          const std::string& why) {
  std::string json = "{\"cell_id\": \"" + cell_id + "\", \"lease_uuid\": {\"value\": \"" +
                     lease + "\"}}";
  SqlOutcome out;
  for (int attempt = 0; attempt < 2; attempt++) {
    CallState st;
    out = RunCall(conn, &st, role, svc->cfg().rollback_timeout_ms, svc->cfg().schema,
                  "claims_rollback", json, "");
    if (out.ok || !out.conn_lost) break;
  }
  if (out.ok)
    Log(Level::kInfo, "lease " + lease + " of cell " + cell_id + " rolled back: " + why);
  else if (out.sqlstate == "P0002")
    Log(Level::kInfo, "lease " + lease + " of cell " + cell_id + " was never made (" + why + ")");
  else
    Log(Level::kWarning, "lease " + lease + " of cell " + cell_id + " left outstanding (" +
                             why + "), rollback failed: " + out.sqlstate + " " + out.message);
}

// A version 4 uuid from OpenSSL's random generator, or "" when it fails.
static std::string NewLeaseUuid() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof(b)) != 1) return "";
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  char out[37];
  snprintf(out, sizeof(out),
           "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
           b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
           b[15]);
  return out;
}

// How requests are written for the store and its answers read, made once.
static const pb::util::JsonPrintOptions& PrintOptions() {
  static const pb::util::JsonPrintOptions po = [] {
    pb::util::JsonPrintOptions o;
    o.preserve_proto_field_names = true;
    return o;
  }();
  return po;
}

static const pb::util::JsonParseOptions& ParseOptions() {
  static const pb::util::JsonParseOptions jo = [] {
    pb::util::JsonParseOptions o;
    o.ignore_unknown_fields = true;
    return o;
  }();
  return jo;
}

class CallReactor : public grpc::ServerUnaryReactor {
 public:
  CallReactor(ClaimServiceImpl* svc, grpc::CallbackServerContext* ctx, const char* method,
              const char* fn, pb::Message* resp)
      : svc_(svc), ctx_(ctx), method_(method), fn_(fn), resp_(resp),
        st_(std::make_shared<CallState>()), start_(std::chrono::steady_clock::now()) {}

  // Authenticate, authorize, then queue the SQL.
  void Begin(const pb::Message* req) {
    auto cns = ctx_->auth_context()->FindPropertyValues("x509_common_name");
    if (cns.empty()) return Done(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                                              "no client certificate common name"));
    cn_ = std::string(cns[0].data(), cns[0].size());
    role_ = svc_->ids()->RoleFor(cn_);
    if (role_.empty())
      return Done(grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                               "certificate CN \"" + cn_ + "\" is not in the identity map"));
    rule_ = &svc_->RuleFor(method_);
    if (rule_->predicate == "false")
      return Done(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                               std::string(method_) + " has no access rule"));
    if (!pb::util::MessageToJsonString(*req, &json_, PrintOptions()).ok())
      return Done(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                               "request cannot be written as JSON"));
    // BeginUpdate names its lease itself, so that a call whose outcome is
    // unknown (cancelled or cut off after the store may have committed) can
    // roll that lease back: the caller can never learn its uuid
    if (auto* begin = dynamic_cast<const v1::BeginUpdateRequest*>(req)) {
      chosen_lease_ = NewLeaseUuid();
      if (!chosen_lease_.empty() && json_.size() >= 2 && json_.back() == '}') {
        json_.pop_back();
        json_ += std::string(json_.size() > 1 ? "," : "") + "\"lease_uuid\":\"" +
                 chosen_lease_ + "\"}";
        chosen_cell_ = std::to_string(begin->cell_id());
      } else {
        chosen_lease_.clear();
      }
    }
    deadline_ = ctx_->deadline();
    has_deadline_ = deadline_ < Clock::now() + std::chrono::hours(24 * 365);
    if (has_deadline_)
      deliver_margin_ = std::clamp<Clock::duration>((deadline_ - Clock::now()) / 5,
                                                    std::chrono::milliseconds(2),
                                                    std::chrono::milliseconds(100));
    if (has_deadline_ && deadline_ <= Clock::now())
      return Done(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed"));
    svc_->pool()->Submit([this](Conn& conn) { Execute(conn); });
  }

  void OnCancel() override { st_->Cancel(); }

  void OnDone() override {
    bool cancelled = ctx_->IsCancelled();
    if (!lease_.empty() && cancelled) {
      // The reply with the lease's uuid was not delivered.
      ClaimServiceImpl* svc = svc_;
      std::string role = role_, cell = cell_id_, lease = lease_;
      svc_->pool()->Submit([svc, role, cell, lease](Conn& conn) {
        RollbackLease(svc, conn, role, cell, lease, "the reply did not reach the caller");
      });
    }
    if (LogEnabled(svc_->call_level())) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                            start_).count();
      char dur[32];
      snprintf(dur, sizeof(dur), "%.1f", ms);
      std::string line = "call method=" + std::string(method_) + " cn=" +
                         (cn_.empty() ? "-" : cn_) + " role=" + (role_.empty() ? "-" : role_) +
                         " status=" + kCodeNames[code_] + " duration_ms=" + dur;
      if (!sqlstate_.empty()) line += " sqlstate=" + sqlstate_;
      if (cancelled) line += " caller_gone=yes";
      if (code_ != 0) line += " message=\"" + message_ + "\"";
      Log(svc_->call_level(), line);
    }
    delete this;
  }

 private:
  bool DeadlinePassed() const { return has_deadline_ && Clock::now() >= deadline_; }

  // Whether a reply sent now may reach the caller after its deadline: the
  // deadline is within a fifth of the call's budget (2 to 100 ms) of passing.
  // Such a lease is rolled back rather than sent, since a reply the caller's
  // own timer beat leaves a lease nobody knows.
  bool TooLateToDeliver() const {
    return has_deadline_ && Clock::now() + deliver_margin_ >= deadline_;
  }

  int TimeoutMs() const {
    if (!has_deadline_) return svc_->cfg().default_timeout_ms;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return static_cast<int>(std::max<long>(1, std::min<long>(left.count(), 1000000000)));
  }

  // On a worker: run the SQL, convert the answer, finish the call.
  void Execute(Conn& conn) {
    if (st_->Gone()) return Done(grpc::Status(grpc::StatusCode::CANCELLED, "caller gone"));
    if (DeadlinePassed())
      return Done(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                               "deadline passed while queued"));
    SqlOutcome out = RunCall(conn, st_.get(), role_, TimeoutMs(), svc_->cfg().schema, fn_,
                             json_, rule_->predicate);
    if (out.skipped) return Done(grpc::Status(grpc::StatusCode::CANCELLED, "caller gone"));
    if (!out.ok) {
      if (out.conn_lost || out.sqlstate == "25006") svc_->health()->Poke();
      if (!chosen_lease_.empty() && (out.conn_lost || out.sqlstate.empty() || st_->CancelSent()))
        RollbackLease(svc_, conn, role_, chosen_cell_, chosen_lease_,
                      "the outcome of the call is unknown: " + out.message);
      sqlstate_ = out.sqlstate;
      if (!out.sqlstate.empty()) ctx_->AddTrailingMetadata("claims-sqlstate", out.sqlstate);
      return Done(ToStatus(out, st_->Gone() && !DeadlinePassed()));
    }
    if (!out.allowed)
      return Done(grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                               "role \"" + role_ + "\" may not call " + method_ + " (" +
                                   rule_->rule.text + ")"));
    if (out.null)
      return Done(grpc::Status(grpc::StatusCode::NOT_FOUND, "the value is not claimed"));
    auto parsed = pb::util::JsonStringToMessage(out.value, resp_, ParseOptions());
    if (!parsed.ok())
      return Done(grpc::Status(grpc::StatusCode::INTERNAL,
                               "the store's answer is not a " + resp_->GetTypeName() + ": " +
                                   parsed.ToString()));
    if (auto* begin = dynamic_cast<v1::BeginUpdateResponse*>(resp_)) {
      std::string cell = std::to_string(begin->cell_id()), lease = begin->lease_uuid().value();
      if (st_->Gone() || TooLateToDeliver()) {
        bool late = !st_->Gone() || DeadlinePassed();
        RollbackLease(svc_, conn, role_, cell, lease,
                      late ? "the caller's deadline passed or was too close" : "the caller cancelled");
        return Done(late
                        ? grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       "deadline passed; the lease was rolled back")
                        : grpc::Status(grpc::StatusCode::CANCELLED,
                                       "caller gone; the lease was rolled back"));
      }
      cell_id_ = cell;
      lease_ = lease;
    }
    Done(grpc::Status::OK);
  }

  void Done(grpc::Status s) {
    code_ = s.error_code() >= 0 && s.error_code() <= 16 ? s.error_code() : 2;
    message_ = s.error_message();
    Finish(s);
  }

  ClaimServiceImpl* svc_;
  grpc::CallbackServerContext* ctx_;
  const char* method_;
  const char* fn_;
  pb::Message* resp_;
  std::shared_ptr<CallState> st_;
  std::chrono::steady_clock::time_point start_;
  Clock::time_point deadline_;
  bool has_deadline_ = false;
  Clock::duration deliver_margin_{0};
  const ClaimServiceImpl::MethodRule* rule_ = nullptr;
  std::string cn_, role_, json_, sqlstate_, message_, cell_id_, lease_;
  std::string chosen_lease_, chosen_cell_;  // BeginUpdate: the uuid the gateway chose
  int code_ = 0;
};

ClaimServiceImpl::ClaimServiceImpl(const Config& cfg, IdentityMap* ids, Pool* pool,
                                   Health* health, Level call_level)
    : cfg_(cfg), ids_(ids), pool_(pool), health_(health), call_level_(call_level) {
  const pb::ServiceDescriptor* svc = ServiceDescriptor();
  for (int i = 0; i < svc->method_count(); i++) {
    AccessRule r = RuleOf(svc->method(i));
    std::string predicate = r.Predicate();
    rules_[svc->method(i)->name()] = MethodRule{r, predicate};
  }
}

const ClaimServiceImpl::MethodRule& ClaimServiceImpl::RuleFor(const char* method) const {
  static const MethodRule none{AccessRule(), "false"};
  auto it = rules_.find(method);
  return it == rules_.end() ? none : it->second;
}

bool ClaimServiceImpl::CheckRules(std::string* err) const {
  const pb::ServiceDescriptor* svc = ServiceDescriptor();
  for (int i = 0; i < svc->method_count(); i++) {
    const pb::MethodDescriptor* m = svc->method(i);
    AccessRule r = RuleOf(m);
    if (r.Predicate() == "false") {
      *err = m->name() + " has no access_control rule";
      return false;
    }
    if (r.matching_cell && !m->input_type()->FindFieldByName("cell_id")) {
      *err = m->name() + " is for a matching cell but its request has no cell_id";
      return false;
    }
    Log(Level::kDebug, "access " + m->name() + ": " + r.text);
  }
  return true;
}

grpc::ServerUnaryReactor* ClaimServiceImpl::Start(grpc::CallbackServerContext* ctx,
                                                  const char* method, const char* fn,
                                                  const pb::Message* req, pb::Message* resp) {
  auto* r = new CallReactor(this, ctx, method, fn, resp);
  r->Begin(req);
  return r;
}

grpc::ServerUnaryReactor* ClaimServiceImpl::GetCells(grpc::CallbackServerContext* ctx,
                                                     const ts::GetCellsRequest* req,
                                                     ts::GetCellsResponse* resp) {
  return Start(ctx, "GetCells", "claims_get_cells", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::GetRecord(grpc::CallbackServerContext* ctx,
                                                      const v1::GetRecordRequest* req,
                                                      v1::GetRecordResponse* resp) {
  return Start(ctx, "GetRecord", "claims_get_record", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::BeginUpdate(grpc::CallbackServerContext* ctx,
                                                        const v1::BeginUpdateRequest* req,
                                                        v1::BeginUpdateResponse* resp) {
  return Start(ctx, "BeginUpdate", "claims_begin_update", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::CommitUpdate(grpc::CallbackServerContext* ctx,
                                                         const v1::CommitUpdateRequest* req,
                                                         v1::CommitUpdateResponse* resp) {
  return Start(ctx, "CommitUpdate", "claims_commit", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::RollbackUpdate(grpc::CallbackServerContext* ctx,
                                                           const v1::RollbackUpdateRequest* req,
                                                           v1::RollbackUpdateResponse* resp) {
  return Start(ctx, "RollbackUpdate", "claims_rollback", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::ListLeases(grpc::CallbackServerContext* ctx,
                                                       const v1::ListLeasesRequest* req,
                                                       v1::ListLeasesResponse* resp) {
  return Start(ctx, "ListLeases", "claims_list_leases", req, resp);
}
grpc::ServerUnaryReactor* ClaimServiceImpl::ListRecords(grpc::CallbackServerContext* ctx,
                                                        const v1::ListRecordsRequest* req,
                                                        v1::ListRecordsResponse* resp) {
  return Start(ctx, "ListRecords", "claims_list_records", req, resp);
}

}  // namespace claims_grpc
