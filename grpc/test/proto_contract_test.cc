// proto_contract_test: compares the descriptors of the project's .proto files
// with GitLab's reference FileDescriptorSet (grpc/test/claims_v1.pb) field by
// field and fails on any difference in the wire contract.
//
//   proto_contract_test REFERENCE.pb            the descriptors compiled into
//                                               this binary (what claims-grpc runs)
//   proto_contract_test REFERENCE.pb OURS.pb    a descriptor set made by protoc
//
// Output is TAP: one result per reference file; differences as diagnostics.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/util/message_differencer.h>

#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "proto/autz.pb.h"
#include "proto/claims/v1/service.pb.h"

namespace pb = google::protobuf;
using Errors = std::vector<std::string>;

// Read a serialized FileDescriptorSet.
static bool ReadSet(const std::string& path, pb::FileDescriptorSet* set) {
  std::ifstream in(path, std::ios::binary);
  return in && set->ParseFromIstream(&in);
}

// Build every file of a set into a pool, dependencies first as the set lists them.
static bool BuildPool(const pb::FileDescriptorSet& set, pb::DescriptorPool* pool) {
  for (const auto& file : set.file()) {
    if (pool->BuildFile(file) == nullptr) {
      std::cerr << "cannot build " << file.name() << "\n";
      return false;
    }
  }
  return true;
}

static std::string TypeName(const pb::FieldDescriptor* f) {
  if (f->message_type()) return f->message_type()->full_name();
  if (f->enum_type()) return f->enum_type()->full_name();
  return "";
}

static std::string OneofName(const pb::FieldDescriptor* f) {
  return f->containing_oneof() ? f->containing_oneof()->name() : "";
}

// Compare one attribute; record "path: what ours != reference".
template <typename T>
static void Same(Errors* e, const std::string& path, const char* what, const T& ours,
                 const T& ref) {
  if (ours == ref) return;
  std::ostringstream s;
  s << path << ": " << what << " is " << ours << ", reference has " << ref;
  e->push_back(s.str());
}

static void CompareField(const pb::FieldDescriptor* a, const pb::FieldDescriptor* b,
                         const std::string& path, Errors* e) {
  std::string p = path + "." + b->name();
  Same(e, p, "name", a->name(), b->name());
  Same(e, p, "number", a->number(), b->number());
  Same(e, p, "type", std::string(a->type_name()), std::string(b->type_name()));
  Same(e, p, "label", static_cast<int>(a->label()), static_cast<int>(b->label()));
  Same(e, p, "json name", a->json_name(), b->json_name());
  Same(e, p, "message/enum type", TypeName(a), TypeName(b));
  Same(e, p, "oneof", OneofName(a), OneofName(b));
  Same(e, p, "proto3 optional", a->has_optional_keyword(), b->has_optional_keyword());
  Same(e, p, "packed", a->is_packed(), b->is_packed());
  if (a->is_extension() || b->is_extension())
    Same(e, p, "extendee", a->containing_type()->full_name(),
         b->containing_type()->full_name());
}

static void CompareEnum(const pb::EnumDescriptor* a, const pb::EnumDescriptor* b, Errors* e) {
  const std::string& p = b->full_name();
  for (int i = 0; i < b->value_count(); i++) {
    const pb::EnumValueDescriptor* rv = b->value(i);
    const pb::EnumValueDescriptor* ov = a->FindValueByName(rv->name());
    if (!ov)
      e->push_back(p + ": value " + rv->name() + " missing");
    else
      Same(e, p + "." + rv->name(), "number", ov->number(), rv->number());
  }
  for (int i = 0; i < a->value_count(); i++)
    if (!b->FindValueByName(a->value(i)->name()))
      e->push_back(p + ": value " + a->value(i)->name() + " not in the reference");
}

static void CompareMessage(const pb::Descriptor* a, const pb::Descriptor* b, Errors* e) {
  const std::string& p = b->full_name();
  for (int i = 0; i < b->field_count(); i++) {
    const pb::FieldDescriptor* rf = b->field(i);
    const pb::FieldDescriptor* of = a->FindFieldByName(rf->name());
    if (!of) of = a->FindFieldByNumber(rf->number());
    if (!of)
      e->push_back(p + ": field " + rf->name() + " missing");
    else
      CompareField(of, rf, p, e);
  }
  for (int i = 0; i < a->field_count(); i++)
    if (!b->FindFieldByName(a->field(i)->name()) && !b->FindFieldByNumber(a->field(i)->number()))
      e->push_back(p + ": field " + a->field(i)->name() + " not in the reference");
  Same(e, p, "oneof count", a->oneof_decl_count(), b->oneof_decl_count());
  for (int i = 0; i < b->oneof_decl_count() && i < a->oneof_decl_count(); i++) {
    const pb::OneofDescriptor* ro = b->oneof_decl(i);
    const pb::OneofDescriptor* oo = a->oneof_decl(i);
    Same(e, p + ".oneof[" + std::to_string(i) + "]", "name", oo->name(), ro->name());
    Same(e, p + "." + ro->name(), "field count", oo->field_count(), ro->field_count());
    Same(e, p + "." + ro->name(), "synthetic (proto3 optional)", oo->is_synthetic(),
         ro->is_synthetic());
  }
  for (int i = 0; i < b->nested_type_count(); i++) {
    const pb::Descriptor* on = a->FindNestedTypeByName(b->nested_type(i)->name());
    if (!on)
      e->push_back(p + ": nested message " + b->nested_type(i)->name() + " missing");
    else
      CompareMessage(on, b->nested_type(i), e);
  }
  Same(e, p, "nested message count", a->nested_type_count(), b->nested_type_count());
  for (int i = 0; i < b->enum_type_count(); i++) {
    const pb::EnumDescriptor* oe = a->FindEnumTypeByName(b->enum_type(i)->name());
    if (!oe)
      e->push_back(p + ": nested enum " + b->enum_type(i)->name() + " missing");
    else
      CompareEnum(oe, b->enum_type(i), e);
  }
  Same(e, p, "nested enum count", a->enum_type_count(), b->enum_type_count());
  Same(e, p, "extension count", a->extension_count(), b->extension_count());
}

// The access_control rules of a method, in order, as text.
static std::string Rules(const pb::MethodDescriptor* m) {
  std::string out;
  const auto& ac = m->options().GetExtension(gitlab::cells::topology_service::access_control);
  for (int r : ac.authorization_rules())
    out += gitlab::cells::topology_service::AuthorizationRule_Name(r) + " ";
  return out;
}

static void CompareService(const pb::ServiceDescriptor* a, const pb::ServiceDescriptor* b,
                           Errors* e) {
  const std::string& p = b->full_name();
  for (int i = 0; i < b->method_count(); i++) {
    const pb::MethodDescriptor* rm = b->method(i);
    const pb::MethodDescriptor* om = a->FindMethodByName(rm->name());
    std::string mp = p + "." + rm->name();
    if (!om) {
      e->push_back(p + ": method " + rm->name() + " missing");
      continue;
    }
    Same(e, mp, "input", om->input_type()->full_name(), rm->input_type()->full_name());
    Same(e, mp, "output", om->output_type()->full_name(), rm->output_type()->full_name());
    Same(e, mp, "client streaming", om->client_streaming(), rm->client_streaming());
    Same(e, mp, "server streaming", om->server_streaming(), rm->server_streaming());
    Same(e, mp, "access_control", Rules(om), Rules(rm));
    if (!pb::util::MessageDifferencer::Equals(om->options(), rm->options()))
      e->push_back(mp + ": method options differ: " + om->options().ShortDebugString() +
                   " vs " + rm->options().ShortDebugString());
  }
  Same(e, p, "method count", a->method_count(), b->method_count());
}

static void CompareFile(const pb::FileDescriptor* a, const pb::FileDescriptor* b, Errors* e) {
  const std::string& p = b->name();
  Same(e, p, "package", a->package(), b->package());
  Same(e, p, "syntax", std::string(pb::FileDescriptor::SyntaxName(a->syntax())),
       std::string(pb::FileDescriptor::SyntaxName(b->syntax())));
  for (int i = 0; i < b->message_type_count(); i++) {
    const pb::Descriptor* om = a->FindMessageTypeByName(b->message_type(i)->name());
    if (!om)
      e->push_back(p + ": message " + b->message_type(i)->name() + " missing");
    else
      CompareMessage(om, b->message_type(i), e);
  }
  Same(e, p, "message count", a->message_type_count(), b->message_type_count());
  for (int i = 0; i < b->enum_type_count(); i++) {
    const pb::EnumDescriptor* oe = a->FindEnumTypeByName(b->enum_type(i)->name());
    if (!oe)
      e->push_back(p + ": enum " + b->enum_type(i)->name() + " missing");
    else
      CompareEnum(oe, b->enum_type(i), e);
  }
  Same(e, p, "enum count", a->enum_type_count(), b->enum_type_count());
  for (int i = 0; i < b->extension_count(); i++) {
    const pb::FieldDescriptor* ox = a->FindExtensionByName(b->extension(i)->name());
    if (!ox)
      e->push_back(p + ": extension " + b->extension(i)->name() + " missing");
    else
      CompareField(ox, b->extension(i), p, e);
  }
  Same(e, p, "extension count", a->extension_count(), b->extension_count());
  for (int i = 0; i < b->service_count(); i++) {
    const pb::ServiceDescriptor* os = a->FindServiceByName(b->service(i)->name());
    if (!os)
      e->push_back(p + ": service " + b->service(i)->name() + " missing");
    else
      CompareService(os, b->service(i), e);
  }
  Same(e, p, "service count", a->service_count(), b->service_count());
}

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: proto_contract_test REFERENCE.pb [OURS.pb]\n";
    return 2;
  }
  pb::FileDescriptorSet ref_set, our_set;
  pb::DescriptorPool ref_pool, set_pool;
  if (!ReadSet(argv[1], &ref_set) || !BuildPool(ref_set, &ref_pool)) {
    std::cerr << "cannot load " << argv[1] << "\n";
    return 2;
  }
  const pb::DescriptorPool* ours = pb::DescriptorPool::generated_pool();
  std::string what = "the compiled-in descriptors";
  if (argc == 3) {
    if (!ReadSet(argv[2], &our_set) || !BuildPool(our_set, &set_pool)) {
      std::cerr << "cannot load " << argv[2] << "\n";
      return 2;
    }
    ours = &set_pool;
    what = argv[2];
  }
  std::vector<const pb::FileDescriptor*> files;
  for (const auto& f : ref_set.file())
    if (f.name().rfind("proto/", 0) == 0) files.push_back(ref_pool.FindFileByName(f.name()));
  int failed = 0, n = 0;
  std::cout << "1.." << files.size() + (argc == 3 ? 1 : 0) << "\n";
  for (const pb::FileDescriptor* rf : files) {
    Errors e;
    const pb::FileDescriptor* of = ours->FindFileByName(rf->name());
    if (!of)
      e.push_back(rf->name() + ": file missing");
    else
      CompareFile(of, rf, &e);
    n++;
    std::cout << (e.empty() ? "ok " : "not ok ") << n << " - " << rf->name() << " of " << what
              << " matches the reference\n";
    for (const auto& msg : e) std::cout << "# " << msg << "\n";
    if (!e.empty()) failed++;
  }
  if (argc == 3) {
    Errors e;
    for (const auto& f : our_set.file())
      if (f.name().rfind("proto/", 0) == 0 && !ref_pool.FindFileByName(f.name()))
        e.push_back(f.name() + ": not in the reference");
    n++;
    std::cout << (e.empty() ? "ok " : "not ok ") << n << " - no file beyond the reference\n";
    for (const auto& msg : e) std::cout << "# " << msg << "\n";
    if (!e.empty()) failed++;
  }
  return failed ? 1 : 0;
}
