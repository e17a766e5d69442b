// claims-grpc-call: a minimal mTLS client of claims-grpc for tests and demos.
//
//   claims-grpc-call --target HOST:PORT --ca F --cert F --key F
//                    [--server-name NAME] [--timeout-ms N] METHOD [JSON]
//
// METHOD is a ClaimService method (BeginUpdate, ...) taking JSON (proto3 JSON
// of its request, default {}), or "Health" (grpc.health.v1, JSON ignored).
// Prints the response as proto3 JSON on stdout (Health: the status name),
// "STATUS_NAME: message" on stderr; exits with the gRPC status code.
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "proto/claims/v1/service.grpc.pb.h"

namespace pb = google::protobuf;

static const char* kCodeNames[] = {
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
    "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
    "UNAUTHENTICATED"};

static std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "cannot read " << path << "\n";
    exit(2);
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// One unary call with raw bytes through the generic stub.
static grpc::Status Call(grpc::GenericStub* stub, grpc::ClientContext* ctx,
                         const std::string& method, const std::string& req,
                         std::string* resp) {
  grpc::CompletionQueue cq;
  grpc::Slice slice(req);
  grpc::ByteBuffer in(&slice, 1), out;
  auto call = stub->PrepareUnaryCall(ctx, method, in, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&out, &status, reinterpret_cast<void*>(1));
  void* tag;
  bool ok;
  cq.Next(&tag, &ok);
  std::vector<grpc::Slice> slices;
  if (status.ok() && out.Dump(&slices).ok())
    for (auto& s : slices) resp->append(reinterpret_cast<const char*>(s.begin()), s.size());
  return status;
}

int main(int argc, char** argv) {
  std::map<std::string, std::string> opt = {{"--timeout-ms", "5000"}};
  std::vector<std::string> args;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0 && i + 1 < argc)
      opt[a] = argv[++i];
    else
      args.push_back(a);
  }
  if (args.empty() || !opt.count("--target") || !opt.count("--ca")) {
    std::cerr << "usage: claims-grpc-call --target HOST:PORT --ca F [--cert F --key F]"
                 " [--server-name N] [--timeout-ms N] METHOD [JSON]\n";
    return 2;
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(opt["--ca"]);
  if (opt.count("--cert")) ssl.pem_cert_chain = ReadFile(opt["--cert"]);
  if (opt.count("--key")) ssl.pem_private_key = ReadFile(opt["--key"]);
  grpc::ChannelArguments chargs;
  if (opt.count("--server-name")) chargs.SetSslTargetNameOverride(opt["--server-name"]);
  auto channel = grpc::CreateCustomChannel(opt["--target"], grpc::SslCredentials(ssl), chargs);
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::milliseconds(std::stol(opt["--timeout-ms"])));

  std::string method = args[0], body, resp;
  grpc::Status status;
  if (method == "Health") {
    // HealthCheckRequest{service: ""} is empty; the response's field 1 is the status.
    status = Call(&stub, &ctx, "/grpc.health.v1.Health/Check", "", &resp);
    if (status.ok()) {
      int s = resp.size() == 2 && resp[0] == 0x08 ? resp[1] : 0;
      const char* names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
      std::cout << (s >= 0 && s <= 3 ? names[s] : "?") << "\n";
    }
  } else {
    const pb::ServiceDescriptor* svc =
        gitlab::cells::topology_service::claims::v1::ClaimService::service_full_name()
            ? pb::DescriptorPool::generated_pool()->FindServiceByName(
                  gitlab::cells::topology_service::claims::v1::ClaimService::service_full_name())
            : nullptr;
    const pb::MethodDescriptor* m = svc ? svc->FindMethodByName(method) : nullptr;
    if (!m) {
      std::cerr << "unknown method " << method << "\n";
      return 2;
    }
    pb::DynamicMessageFactory factory;
    std::unique_ptr<pb::Message> req(
        pb::MessageFactory::generated_factory()->GetPrototype(m->input_type())->New());
    std::unique_ptr<pb::Message> out(
        pb::MessageFactory::generated_factory()->GetPrototype(m->output_type())->New());
    auto st = pb::util::JsonStringToMessage(args.size() > 1 ? args[1] : "{}", req.get());
    if (!st.ok()) {
      std::cerr << "bad request JSON: " << st.ToString() << "\n";
      return 2;
    }
    status = Call(&stub, &ctx, "/" + svc->full_name() + "/" + method,
                  req->SerializeAsString(), &resp);
    if (status.ok()) {
      std::string json;
      pb::util::JsonPrintOptions po;
      po.preserve_proto_field_names = true;
      out->ParseFromString(resp);
      (void)pb::util::MessageToJsonString(*out, &json, po);
      std::cout << json << "\n";
    }
  }
  int code = status.error_code();
  std::cerr << (code >= 0 && code <= 16 ? kCodeNames[code] : "?") << ": "
            << status.error_message() << "\n";
  return code;
}
