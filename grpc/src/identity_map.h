// The identity map: client certificate CN -> database role, read from a file
// of lines "CN  role" (# comments, "double quotes" around a CN with spaces),
// replaced as a whole on reload.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace claims_grpc {

class IdentityMap {
 public:
  // Read path; on error keep the current map and return false with *err.
  bool Load(const std::string& path, std::string* err);
  // The role mapped to cn, or "" when the CN is unknown.
  std::string RoleFor(const std::string& cn) const;
  size_t Size() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const std::map<std::string, std::string>> map_ =
      std::make_shared<std::map<std::string, std::string>>();
};

}  // namespace claims_grpc
