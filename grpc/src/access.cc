// Reading access_control options and turning them into SQL predicates.
#include "access.h"

#include "proto/autz.pb.h"

namespace claims_grpc {

namespace ts = gitlab::cells::topology_service;

AccessRule RuleOf(const google::protobuf::MethodDescriptor* method) {
  AccessRule r;
  const auto& ac = method->options().GetExtension(ts::access_control);
  for (int rule : ac.authorization_rules()) {
    switch (rule) {
      case ts::RULE_ALLOW_ANY_AUTHENTICATED: r.any_authenticated = true; break;
      case ts::RULE_ALLOW_MATCHING_CELL_ONLY: r.matching_cell = true; break;
      case ts::RULE_ALLOW_ANY_ADMIN: r.admin = true; break;
      case ts::RULE_ALLOW_ANY_CELL: r.any_cell = true; break;
      case ts::RULE_ALLOW_ANY_ROUTER: r.router = true; break;
      default: break;
    }
    r.text += (r.text.empty() ? "" : ", ") + ts::AuthorizationRule_Name(rule);
  }
  return r;
}

std::string AccessRule::Predicate() const {
  if (any_authenticated || matching_cell) return "";
  std::string p;
  auto add = [&p](const char* role) {
    p += std::string(p.empty() ? "" : " OR ") + "pg_catalog.pg_has_role('" + role +
         "', 'USAGE')";
  };
  if (admin) add("claims_admin");
  if (any_cell) add("claims_cell");
  if (router) add("claims_router");
  return p.empty() ? "false" : p;
}

}  // namespace claims_grpc
