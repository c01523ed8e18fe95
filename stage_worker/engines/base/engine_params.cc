#include "stage_worker/engines/base/engine_params.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_error.h"

namespace omnistage {

EngineParams::EngineParams(std::string engine, std::map<std::string, std::string> values,
                           std::string what)
    : engine_(std::move(engine)), values_(std::move(values)), what_(std::move(what)) {}

const std::string* EngineParams::Lookup(absl::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
    known_.emplace_back(key);
  }
  auto it = values_.find(std::string(key));
  return it == values_.end() ? nullptr : &it->second;
}

void EngineParams::Fail(absl::string_view key, absl::string_view expected,
                        absl::string_view value) {
  if (!status_.ok()) return;
  status_ = AtField(absl::InvalidArgumentError(absl::StrCat("engine ", engine_, ": ", what_, " ",
                                                           key, ": expected ", expected, ", got '",
                                                           value, "'")),
                    key);
}

int64_t EngineParams::Int(absl::string_view key, int64_t default_value, int64_t min, int64_t max) {
  const std::string* raw = Lookup(key);
  if (raw == nullptr) return default_value;
  int64_t value = 0;
  if (!absl::SimpleAtoi(*raw, &value) || value < min || value > max) {
    Fail(key, absl::StrCat("an integer in [", min, ", ", max, "]"), *raw);
    return default_value;
  }
  return value;
}

double EngineParams::Double(absl::string_view key, double default_value, double min,
                            double max) {
  const std::string* raw = Lookup(key);
  if (raw == nullptr) return default_value;
  double value = 0;
  if (!absl::SimpleAtod(*raw, &value) || !(value >= min && value <= max)) {
    Fail(key, absl::StrCat("a number in [", min, ", ", max, "]"), *raw);
    return default_value;
  }
  return value;
}

bool EngineParams::Bool(absl::string_view key, bool default_value) {
  const std::string* raw = Lookup(key);
  if (raw == nullptr) return default_value;
  bool value = false;
  if (!absl::SimpleAtob(*raw, &value)) {
    Fail(key, "a boolean (true or false)", *raw);
    return default_value;
  }
  return value;
}

absl::Duration EngineParams::DurationUs(absl::string_view key, absl::Duration default_value,
                                        absl::Duration max) {
  const std::string* raw = Lookup(key);
  if (raw == nullptr) return default_value;
  absl::Duration value;
  int64_t micros = 0;
  bool parsed = absl::SimpleAtoi(*raw, &micros);
  if (parsed) {
    value = absl::Microseconds(micros);
  } else {
    // absl::ParseDuration also accepts a bare "0"; the integer path handled that.
    parsed = absl::ParseDuration(absl::StripAsciiWhitespace(*raw), &value);
  }
  if (!parsed || value < absl::ZeroDuration() || value > max) {
    Fail(key,
         absl::StrCat("a duration in [0, ", absl::ToInt64Microseconds(max),
                      "] microseconds (e.g. 2000 or 2ms)"),
         *raw);
    return default_value;
  }
  return value;
}

std::string EngineParams::Text(absl::string_view key, absl::string_view default_value) {
  const std::string* raw = Lookup(key);
  return raw == nullptr ? std::string(default_value) : *raw;
}

std::string EngineParams::Enum(absl::string_view key, absl::string_view default_value,
                               const std::vector<std::string>& allowed) {
  const std::string* raw = Lookup(key);
  if (raw == nullptr) return std::string(default_value);
  if (std::find(allowed.begin(), allowed.end(), *raw) == allowed.end()) {
    Fail(key, absl::StrCat("one of ", absl::StrJoin(allowed, ", ")), *raw);
    return std::string(default_value);
  }
  return *raw;
}

absl::Status EngineParams::Finish() const {
  if (!status_.ok()) return status_;
  for (const auto& [key, value] : values_) {
    if (std::find(known_.begin(), known_.end(), key) != known_.end()) continue;
    return AtField(absl::InvalidArgumentError(absl::StrCat(
                       "engine ", engine_, ": unknown ", what_, " '", key, "' (known: ",
                       known_.empty() ? "none" : absl::StrJoin(known_, ", "), ")")),
                   key);
  }
  return absl::OkStatus();
}

}  // namespace omnistage
