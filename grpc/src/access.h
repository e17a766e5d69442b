// Access rules of each ClaimService method, read at run time from the
// access_control option of its descriptor.
#pragma once

#include <google/protobuf/descriptor.h>

#include <string>

namespace claims_grpc {

struct AccessRule {
  bool any_authenticated = false;  // RULE_ALLOW_ANY_AUTHENTICATED
  bool matching_cell = false;      // RULE_ALLOW_MATCHING_CELL_ONLY
  bool admin = false;              // RULE_ALLOW_ANY_ADMIN
  bool any_cell = false;           // RULE_ALLOW_ANY_CELL
  bool router = false;             // RULE_ALLOW_ANY_ROUTER
  std::string text;                // the rules, for messages
  // The SQL predicate the gateway checks as the caller's role before the
  // call: "" when no check is needed here (any authenticated caller, or a
  // matching cell, which the store itself enforces: cell N's role or an
  // administrator), "false" when the method names no rule.
  std::string Predicate() const;
};

AccessRule RuleOf(const google::protobuf::MethodDescriptor* method);

}  // namespace claims_grpc
