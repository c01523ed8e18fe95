// Log: the services' log lines — leveled, timestamped (UTC, microseconds) and
// on stderr, as text for people or as JSON lines for log shippers. Built on
// spdlog (Debian's libspdlog-dev): its sink is thread-safe and its formatter
// writes the time and level; we add the fields.
//
//   InitLogging({"orchestrator", LogFormat::kText, LogLevel::kInfo});
//   LogInfo(LogContext{"req-7", 1, 0}, "failed: worker exited");  // request, stage, replica
//   // 2026-11-30T18:33:10.123456Z info orchestrator request=req-7 stage=1 replica=0 failed: worker exited
//   // {"ts":"2026-11-30T18:33:10.123456Z","level":"info","service":"orchestrator",
//   //  "request_id":"req-7","stage":1,"replica":0,"msg":"failed: worker exited"}
//
// A line about a request carries its id, and the stage and replica where that
// matters, and its W3C trace id when the client sent a traceparent, so one
// request can be followed across processes. A stage worker's lines carry its
// instance, and the session where one is concerned:
//   // ... info stage_worker stage=1 instance=talker-1-4711-1 session=2 session opened
// Thread-safe.
#ifndef OMNISTAGE_COMMON_LOG_H_
#define OMNISTAGE_COMMON_LOG_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace omnistage {

enum class LogFormat { kText, kJson };
enum class LogLevel { kDebug, kInfo, kWarning, kError };

struct LogOptions {
  std::string service = "omnistage";
  LogFormat format = LogFormat::kText;
  LogLevel level = LogLevel::kInfo;
};

// What a line is about; unset fields are left out.
struct LogContext {
  std::string request_id;
  int stage = -1;
  int replica = -1;
  // The trace id of a W3C traceparent (32 hex digits).
  std::string trace_id;
  // A stage worker's instance id (its Ready's), and the session (its number
  // on that worker) the line is about.
  std::string instance = {};
  int64_t session = -1;
};

// Sets the format and level of every later line; call at start-up, before
// other threads log. Lines before it use the defaults (text, info, service
// "omnistage").
void InitLogging(const LogOptions& options);

// The options for `service` from the --log_format and --log_level values;
// INVALID_ARGUMENT naming the flag for a bad one.
absl::StatusOr<LogOptions> LogOptionsFromFlags(const std::string& service,
                                               absl::string_view format, absl::string_view level);

// "text" / "json"; "debug" / "info" / "warning" / "error" (for the flags).
absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name);
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);

void Log(LogLevel level, const LogContext& context, absl::string_view message);
inline void LogInfo(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kInfo, context, message);
}
inline void LogWarning(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kWarning, context, message);
}
inline void LogError(const LogContext& context, absl::string_view message) {
  Log(LogLevel::kError, context, message);
}
inline void LogInfo(absl::string_view message) { Log(LogLevel::kInfo, {}, message); }
inline void LogWarning(absl::string_view message) { Log(LogLevel::kWarning, {}, message); }
inline void LogError(absl::string_view message) { Log(LogLevel::kError, {}, message); }

// Within its scope, the lines its thread logs below warning are held and
// written together when it ends: one write to stderr instead of one per line
// (the orchestrator's loop wraps each task in one, so the access lines of the
// requests a worker's event ends cost one write). A warning or an error writes
// what is held, and itself, at once. Scopes nest; the outermost writes. Not
// copyable; destroy it on the thread that made it.
class LogBatch {
 public:
  LogBatch();
  ~LogBatch();
  LogBatch(const LogBatch&) = delete;
  LogBatch& operator=(const LogBatch&) = delete;

 private:
  bool outermost_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_LOG_H_
