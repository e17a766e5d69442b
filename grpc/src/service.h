// ClaimService over the callback API: each call authenticates its caller's
// CN through the identity map, applies its method's access rules, and runs
// as SQL on the pool; a BeginUpdate whose caller is gone once its lease
// exists rolls the lease back at once.
#pragma once

#include <chrono>
#include <map>
#include <string>

#include "access.h"
#include "config.h"
#include "health.h"
#include "identity_map.h"
#include "log.h"
#include "pool.h"
#include "proto/claims/v1/service.grpc.pb.h"

namespace claims_grpc {

namespace v1 = gitlab::cells::topology_service::claims::v1;
namespace ts = gitlab::cells::topology_service;

class ClaimServiceImpl final : public v1::ClaimService::CallbackService {
 public:
  ClaimServiceImpl(const Config& cfg, IdentityMap* ids, Pool* pool, Health* health,
                   Level call_level);
  // false with *err when a method's access rules cannot be enforced.
  bool CheckRules(std::string* err) const;

  grpc::ServerUnaryReactor* GetCells(grpc::CallbackServerContext* ctx,
                                     const ts::GetCellsRequest* req,
                                     ts::GetCellsResponse* resp) override;
  grpc::ServerUnaryReactor* GetRecord(grpc::CallbackServerContext* ctx,
                                      const v1::GetRecordRequest* req,
                                      v1::GetRecordResponse* resp) override;
  grpc::ServerUnaryReactor* BeginUpdate(grpc::CallbackServerContext* ctx,
                                        const v1::BeginUpdateRequest* req,
                                        v1::BeginUpdateResponse* resp) override;
  grpc::ServerUnaryReactor* CommitUpdate(grpc::CallbackServerContext* ctx,
                                         const v1::CommitUpdateRequest* req,
                                         v1::CommitUpdateResponse* resp) override;
  grpc::ServerUnaryReactor* RollbackUpdate(grpc::CallbackServerContext* ctx,
                                           const v1::RollbackUpdateRequest* req,
                                           v1::RollbackUpdateResponse* resp) override;
  grpc::ServerUnaryReactor* ListLeases(grpc::CallbackServerContext* ctx,
                                       const v1::ListLeasesRequest* req,
                                       v1::ListLeasesResponse* resp) override;
  grpc::ServerUnaryReactor* ListRecords(grpc::CallbackServerContext* ctx,
                                        const v1::ListRecordsRequest* req,
                                        v1::ListRecordsResponse* resp) override;

  const Config& cfg() const { return cfg_; }
  IdentityMap* ids() { return ids_; }
  Pool* pool() { return pool_; }
  Health* health() { return health_; }
  Level call_level() const { return call_level_; }
  // A method's access rule and its predicate, read from its descriptor once.
  struct MethodRule {
    AccessRule rule;
    std::string predicate;
  };
  const MethodRule& RuleFor(const char* method) const;

 private:
  grpc::ServerUnaryReactor* Start(grpc::CallbackServerContext* ctx, const char* method,
                                  const char* fn, const google::protobuf::Message* req,
                                  google::protobuf::Message* resp);
  Config cfg_;
  IdentityMap* ids_;
  Pool* pool_;
  Health* health_;
  Level call_level_;
  std::map<std::string, MethodRule> rules_;
};

}  // namespace claims_grpc
