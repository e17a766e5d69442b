// Logging to stderr with a UTC timestamp and the level name.
#include "log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace claims_grpc {

static std::atomic<int> g_level{static_cast<int>(Level::kInfo)};
static std::mutex g_mu;

bool ParseLevel(const std::string& name, Level* out) {
  static const char* names[] = {"debug", "info", "warning", "error"};
  for (int i = 0; i < 4; i++)
    if (name == names[i]) {
      *out = static_cast<Level>(i);
      return true;
    }
  return false;
}

void SetLogLevel(Level level) { g_level = static_cast<int>(level); }

bool LogEnabled(Level level) { return static_cast<int>(level) >= g_level; }

void Log(Level level, const std::string& line) {
  static const char* tags[] = {"DEBUG", "INFO", "WARNING", "ERROR"};
  if (!LogEnabled(level)) return;
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() %
      1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  char stamp[32];
  strftime(stamp, sizeof(stamp), "%Y-%m-%d %H:%M:%S", &tm);
  std::lock_guard<std::mutex> lock(g_mu);
  fprintf(stderr, "%s.%03dZ claims-grpc %s: %s\n", stamp, ms, tags[static_cast<int>(level)],
          line.c_str());
  fflush(stderr);
}

}  // namespace claims_grpc
