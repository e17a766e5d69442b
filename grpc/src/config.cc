// Flags and configuration file of claims-grpc.
#include "config.h"

#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace claims_grpc {

static const char* kUsage =
    "usage: claims-grpc --listen HOST:PORT --conninfo CONNINFO --tls-cert F --tls-key F\n"
    "                   --client-ca F --identity-map F [options]\n"
    "options (also keys of --config FILE, without the dashes):\n"
    "  --config FILE              read settings from FILE first; flags override it\n"
    "  --schema NAME              schema of the claims extension (public)\n"
    "  --pool-size N              libpq connections to the store (8)\n"
    "  --default-timeout-ms N     statement_timeout of calls without a deadline (30000)\n"
    "  --rollback-timeout-ms N    statement_timeout of a departed caller's rollback (5000)\n"
    "  --health-interval-ms N     how often the store is checked for health (2000)\n"
    "  --tls-watch-interval-s N   how often the reloaded TLS files are picked up (1)\n"
    "  --shutdown-grace-s N       SIGTERM: seconds left to calls in progress (10)\n"
    "  --log-level L              debug, info, warning or error (info)\n"
    "  --call-log-level L         level of the one line logged per call (info)\n"
    "  --port-file F              write the bound port to F (for --listen HOST:0)\n"
    "  --runtime-dir D            private directory for the TLS copies\n"
    "                             ($RUNTIME_DIRECTORY, else a new one under $TMPDIR)\n"
    "  --help, --version\n";

using Setter = std::function<bool(Config*, const std::string&)>;

static Setter Str(std::string Config::*field) {
  return [field](Config* c, const std::string& v) {
    c->*field = v;
    return true;
  };
}

static Setter Int(int Config::*field, int min) {
  return [field, min](Config* c, const std::string& v) {
    char* end = nullptr;
    long n = strtol(v.c_str(), &end, 10);
    if (v.empty() || *end != '\0' || n < min || n > 1000000000) return false;
    c->*field = static_cast<int>(n);
    return true;
  };
}

static const std::map<std::string, Setter>& Keys() {
  static const std::map<std::string, Setter> keys = {
      {"listen", Str(&Config::listen)},
      {"conninfo", Str(&Config::conninfo)},
      {"tls-cert", Str(&Config::tls_cert)},
      {"tls-key", Str(&Config::tls_key)},
      {"client-ca", Str(&Config::client_ca)},
      {"identity-map", Str(&Config::identity_map)},
      {"schema", Str(&Config::schema)},
      {"port-file", Str(&Config::port_file)},
      {"runtime-dir", Str(&Config::runtime_dir)},
      {"log-level", Str(&Config::log_level)},
      {"call-log-level", Str(&Config::call_log_level)},
      {"pool-size", Int(&Config::pool_size, 1)},
      {"default-timeout-ms", Int(&Config::default_timeout_ms, 1)},
      {"rollback-timeout-ms", Int(&Config::rollback_timeout_ms, 1)},
      {"health-interval-ms", Int(&Config::health_interval_ms, 10)},
      {"tls-watch-interval-s", Int(&Config::tls_watch_interval_s, 1)},
      {"shutdown-grace-s", Int(&Config::shutdown_grace_s, 0)},
  };
  return keys;
}

static bool Set(Config* cfg, const std::string& key, const std::string& value,
                std::string* msg) {
  auto it = Keys().find(key);
  if (it == Keys().end()) {
    *msg = "unknown setting \"" + key + "\"";
    return false;
  }
  if (!it->second(cfg, value)) {
    *msg = "invalid value for " + key + ": \"" + value + "\"";
    return false;
  }
  return true;
}

static std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

// Lines "key value" or "key = value"; a value may be in double quotes.
static bool ReadConfigFile(const std::string& path, Config* cfg, std::string* msg) {
  std::ifstream in(path);
  if (!in) {
    *msg = "cannot read configuration file " + path;
    return false;
  }
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    n++;
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    size_t sep = line.find_first_of(" \t=");
    std::string key = line.substr(0, sep);
    std::string value = sep == std::string::npos ? "" : Trim(line.substr(sep));
    if (!value.empty() && value[0] == '=') value = Trim(value.substr(1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (!Set(cfg, key, value, msg)) {
      *msg = path + ":" + std::to_string(n) + ": " + *msg;
      return false;
    }
  }
  return true;
}

bool ParseConfig(int argc, char** argv, Config* cfg, std::string* msg, int* exit_status) {
  *exit_status = 2;
  std::vector<std::pair<std::string, std::string>> flags;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      *msg = kUsage;
      *exit_status = 0;
      return false;
    }
    if (a == "--version") {
      *msg = "claims-grpc 1.0\n";
      *exit_status = 0;
      return false;
    }
    if (a.rfind("--", 0) != 0) {
      *msg = "unexpected argument \"" + a + "\"\n" + kUsage;
      return false;
    }
    std::string key = a.substr(2), value;
    size_t eq = key.find('=');
    if (eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      *msg = "flag --" + key + " needs a value";
      return false;
    }
    flags.emplace_back(key, value);
  }
  for (const auto& f : flags)
    if (f.first == "config" && !ReadConfigFile(f.second, cfg, msg)) return false;
  for (const auto& f : flags)
    if (f.first != "config" && !Set(cfg, f.first, f.second, msg)) {
      *msg = "--" + *msg;
      return false;
    }
  const std::pair<const char*, const std::string*> required[] = {
      {"listen", &cfg->listen},       {"conninfo", &cfg->conninfo},
      {"tls-cert", &cfg->tls_cert},   {"tls-key", &cfg->tls_key},
      {"client-ca", &cfg->client_ca}, {"identity-map", &cfg->identity_map}};
  for (const auto& r : required)
    if (r.second->empty()) {
      *msg = std::string("--") + r.first + " is required (mTLS only, no plaintext)\n" + kUsage;
      return false;
    }
  return true;
}

}  // namespace claims_grpc
