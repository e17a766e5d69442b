// ClaimService: each RPC as one transaction at the store, as the caller's role.
#pragma once

#include <grpcpp/grpcpp.h>

#include <map>
#include <string>

#include "config.h"
#include "identity_map.h"
#include "proto/claims/v1/service.grpc.pb.h"
#include "store.h"

namespace claims_grpc {

namespace v1 = gitlab::cells::topology_service::claims::v1;
namespace ts = gitlab::cells::topology_service;

class ClaimServiceImpl final : public v1::ClaimService::CallbackService {
 public:
  ClaimServiceImpl(const Config& cfg, IdentityMap* map, StorePool* pool);

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

  // Roll back a lease whose caller went away (on a pool thread).
  void RollbackDeparted(const std::string& role, const std::string& cell_id,
                        const std::string& lease_uuid);

 private:
  // Serve one call: the request as proto3 JSON to function fn of the store.
  grpc::ServerUnaryReactor* Serve(const char* method, grpc::CallbackServerContext* ctx,
                                  const google::protobuf::Message& req,
                                  google::protobuf::Message* resp, const std::string& fn);

  // Roll lease back on conn as role (logged when it fails).
  void RollbackOn(StoreConnection& conn, const std::string& role, const std::string& cell_id,
                  const std::string& lease);

  const Config& cfg_;
  IdentityMap* map_;
  StorePool* pool_;
  std::map<std::string, bool> admin_only_;  // method -> only administrators may call it
};

}  // namespace claims_grpc
