#include "common/log.h"

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "spdlog/sinks/base_sink.h"
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

// The lines a LogBatch of this thread holds; null outside one.
thread_local std::string* held_lines = nullptr;

// Writes `size` bytes at `data` to stderr in one write, now.
void WriteNow(const char* data, size_t size) {
  std::fwrite(data, 1, size, stderr);
  std::fflush(stderr);
}

// stderr, one write per line, or held while the logging thread is in a
// LogBatch (warnings and errors write what is held with themselves).
class StderrSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    if (held_lines != nullptr) {
      held_lines->append(line.data(), line.size());
      if (msg.level < spdlog::level::warn) return;
      WriteNow(held_lines->data(), held_lines->size());
      held_lines->clear();
      return;
    }
    WriteNow(line.data(), line.size());
  }
  void flush_() override { std::fflush(stderr); }
};

struct Logger {
  std::shared_ptr<spdlog::logger> logger;
  LogFormat format = LogFormat::kText;
};

Logger& TheLogger() {
  static Logger* logger = [] {
    auto* l = new Logger();
    l->logger = std::make_shared<spdlog::logger>(
        "omnistage", std::make_shared<StderrSink>());
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
      options.service, std::make_shared<StderrSink>());
  if (options.format == LogFormat::kJson) {
    l.logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","service":"%n",%v})",
                          spdlog::pattern_time_type::utc);
  } else {
    l.logger->set_pattern("%Y-%m-%dT%H:%M:%S.%fZ %l %n %v", spdlog::pattern_time_type::utc);
  }
  l.logger->set_level(ToSpdlog(options.level));
  // Every line reaches stderr as it is logged (the sink writes it), except
  // what a LogBatch holds until its end.
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

LogBatch::LogBatch() : outermost_(held_lines == nullptr) {
  // One buffer per thread, kept: a batch costs no allocation.
  thread_local std::string lines;
  if (outermost_) held_lines = &lines;
}

LogBatch::~LogBatch() {
  if (!outermost_) return;
  std::string* lines = held_lines;
  held_lines = nullptr;
  if (lines->empty()) return;
  WriteNow(lines->data(), lines->size());
  lines->clear();
}

}  // namespace omnistage
