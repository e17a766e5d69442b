// Logging to stderr (journald under systemd): one line per event, with a level.
#pragma once

#include <string>

namespace claims_grpc {

enum class Level { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Parse "debug", "info", "warning" or "error"; false when unknown.
bool ParseLevel(const std::string& name, Level* out);
// Lines below this level are dropped.
void SetLogLevel(Level level);
bool LogEnabled(Level level);
void Log(Level level, const std::string& line);

}  // namespace claims_grpc
