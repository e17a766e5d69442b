// Reading the identity map file.
#include "identity_map.h"

#include <fstream>
#include <vector>

namespace claims_grpc {

// Split a line into whitespace-separated tokens ("quoted" tokens may hold
// spaces); false on an unterminated quote.
static bool Tokens(const std::string& line, std::vector<std::string>* out) {
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == ' ' || line[i] == '\t' || line[i] == '\r') {
      i++;
      continue;
    }
    if (line[i] == '#') break;
    std::string tok;
    if (line[i] == '"') {
      size_t end = line.find('"', i + 1);
      if (end == std::string::npos) return false;
      tok = line.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' &&
             line[i] != '#')
        tok += line[i++];
    }
    out->push_back(tok);
  }
  return true;
}

bool IdentityMap::Load(const std::string& path, std::string* err) {
  std::ifstream in(path);
  if (!in) {
    *err = "cannot read identity map " + path;
    return false;
  }
  auto map = std::make_shared<std::map<std::string, std::string>>();
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    std::vector<std::string> tok;
    if (!Tokens(line, &tok) || (!tok.empty() && tok.size() != 2) ||
        (tok.size() == 2 && (tok[0].empty() || tok[1].empty()))) {
      *err = path + ":" + std::to_string(n) + ": expected \"CN role\"";
      return false;
    }
    if (tok.empty()) continue;
    if (map->count(tok[0])) {
      *err = path + ":" + std::to_string(n) + ": CN \"" + tok[0] + "\" is mapped twice";
      return false;
    }
    (*map)[tok[0]] = tok[1];
  }
  std::lock_guard<std::mutex> lock(mu_);
  map_ = map;
  return true;
}

std::string IdentityMap::RoleFor(const std::string& cn) const {
  std::shared_ptr<const std::map<std::string, std::string>> map;
  {
    std::lock_guard<std::mutex> lock(mu_);
    map = map_;
  }
  auto it = map->find(cn);
  return it == map->end() ? "" : it->second;
}

size_t IdentityMap::Size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_->size();
}

}  // namespace claims_grpc
