#include "common/log.h"

#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace omnistage {
namespace {

spdlog::level::level_enum ToSpdlog(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug:
      return spdlog::level::debug;
    case LogLevel::kInfo:
      return spdlog::level::info;
    case LogLevel::kWarning:
      return spdlog::level::warn;
    case LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

// JSON string contents: quotes, backslashes and control characters escaped.
std::string JsonEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  return out;
}

struct Logger {
  std::shared_ptr<spdlog::logger> logger;
  LogFormat format = LogFormat::kText;
};

Logger& TheLogger() {
  static Logger* logger = [] {
    auto* l = new Logger();
    l->logger = std::make_shared<spdlog::logger>(
        "omnistage", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %n %v", spdlog::pattern_time_type::utc);
    return l;
  }();
  return *logger;
}

}  // namespace

void InitLogging(const LogOptions& options) {
  Logger& l = TheLogger();
  l.format = options.format;
  l.logger = std::make_shared<spdlog::logger>(
      options.service, std::make_shared<spdlog::sinks::stderr_sink_mt>());
  if (options.format == LogFormat::kJson) {
    l.logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","service":"%n",%v})",
                          spdlog::pattern_time_type::utc);
  } else {
    l.logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %n %v", spdlog::pattern_time_type::utc);
  }
  l.logger->set_level(ToSpdlog(options.level));
  // Warnings and errors reach the terminal at once; info lines too (the
  // services log a few per request at most, never per token).
  l.logger->flush_on(spdlog::level::info);
}

absl::StatusOr<LogOptions> LogOptionsFromFlags(const std::string& service,
                                               absl::string_view format, absl::string_view level) {
  absl::StatusOr<LogFormat> f = ParseLogFormat(format);
  if (!f.ok()) return absl::InvalidArgumentError(absl::StrCat("--log_format: ", f.status().message()));
  absl::StatusOr<LogLevel> l = ParseLogLevel(level);
  if (!l.ok()) return absl::InvalidArgumentError(absl::StrCat("--log_level: ", l.status().message()));
  return LogOptions{service, *f, *l};
}

absl::StatusOr<LogFormat> ParseLogFormat(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(absl::StrCat("log format '", name, "': text or json"));
}

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  if (lower == "debug") return LogLevel::kDebug;
  if (lower == "info") return LogLevel::kInfo;
  if (lower == "warning" || lower == "warn") return LogLevel::kWarning;
  if (lower == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("log level '", name, "': debug, info, warning or error"));
}

void Log(LogLevel level, const LogContext& context, absl::string_view message) {
  Logger& l = TheLogger();
  if (!l.logger->should_log(ToSpdlog(level))) return;
  std::string line;
  if (l.format == LogFormat::kJson) {
    if (!context.request_id.empty()) {
      absl::StrAppend(&line, "\"request_id\":\"", JsonEscape(context.request_id), "\",");
    }
    if (context.stage >= 0) absl::StrAppend(&line, "\"stage\":", context.stage, ",");
    if (context.replica >= 0) absl::StrAppend(&line, "\"replica\":", context.replica, ",");
    if (!context.instance.empty()) {
      absl::StrAppend(&line, "\"instance\":\"", JsonEscape(context.instance), "\",");
    }
    if (context.session >= 0) absl::StrAppend(&line, "\"session\":", context.session, ",");
    if (!context.trace_id.empty()) {
      absl::StrAppend(&line, "\"trace_id\":\"", JsonEscape(context.trace_id), "\",");
    }
    absl::StrAppend(&line, "\"msg\":\"", JsonEscape(message), "\"");
  } else {
    if (!context.request_id.empty()) absl::StrAppend(&line, "request=", context.request_id, " ");
    if (context.stage >= 0) absl::StrAppend(&line, "stage=", context.stage, " ");
    if (context.replica >= 0) absl::StrAppend(&line, "replica=", context.replica, " ");
    if (!context.instance.empty()) absl::StrAppend(&line, "instance=", context.instance, " ");
    if (context.session >= 0) absl::StrAppend(&line, "session=", context.session, " ");
    if (!context.trace_id.empty()) absl::StrAppend(&line, "trace=", context.trace_id, " ");
    absl::StrAppend(&line, message);
  }
  l.logger->log(ToSpdlog(level), "{}", line);
}

std::string TraceIdOf(absl::string_view traceparent) {
  // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2.
  if (traceparent.size() < 55 || traceparent[2] != '-' || traceparent[35] != '-' ||
      traceparent[52] != '-') {
    return "";
  }
  const absl::string_view trace_id = traceparent.substr(3, 32);
  bool all_zero = true;
  for (char c : trace_id) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return "";
    all_zero = all_zero && c == '0';
  }
  return all_zero ? "" : std::string(trace_id);
}

}  // namespace omnistage
