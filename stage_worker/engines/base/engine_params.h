// EngineParams: typed, validated access to the string parameters an engine is
// created with (from the pipeline config) or a request carries
// (StageParameters.extra).
//
// Errors are sticky: a getter that meets a bad value records the first error and
// returns the default, so an engine reads all its parameters in a row and checks
// once. Finish() also rejects keys that no getter asked for, which catches typos
// in configs ("bach_size") instead of silently using a default.
//
//   EngineParams params("sim_llm", config_params);
//   int64_t batch_size = params.Int("batch_size", 16, 1, 65536);
//   bool fail = params.Bool("fail_utilities", false);
//   absl::Status status = params.Finish();  // INVALID_ARGUMENT naming the key
//
// Every error carries the key as its field path (common/field_error.h).
//
// Not thread-safe; use one instance per parse.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_PARAMS_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_PARAMS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace omnistage {

class EngineParams {
 public:
  // `what` names the kind of value in messages: "parameter" for engine
  // parameters, "extra parameter" for per-request StageParameters.extra.
  EngineParams(std::string engine, std::map<std::string, std::string> values,
               std::string what = "parameter");

  // An integer in [min, max].
  int64_t Int(absl::string_view key, int64_t default_value, int64_t min, int64_t max);

  // "true"/"false" (also 1/0, yes/no, as absl::SimpleAtob reads them).
  bool Bool(absl::string_view key, bool default_value);

  // A duration in [0, max]: a bare integer counts microseconds ("2000"); a value
  // with a unit is read by absl::ParseDuration ("2ms", "1.5s").
  absl::Duration DurationUs(absl::string_view key, absl::Duration default_value,
                            absl::Duration max);

  // A decimal number in [min, max].
  double Double(absl::string_view key, double default_value, double min, double max);

  // Any string (a path, a list the engine parses itself).
  std::string Text(absl::string_view key, absl::string_view default_value);

  // One of `allowed`, spelled exactly.
  std::string Enum(absl::string_view key, absl::string_view default_value,
                   const std::vector<std::string>& allowed);

  // The first bad value met by a getter, else the first key no getter asked for
  // (listing the known keys), else OK. Call after every getter.
  absl::Status Finish() const;

 private:
  // The raw value of `key`, or nullptr when absent; remembers `key` as known.
  const std::string* Lookup(absl::string_view key);
  // Records "<prefix> <what> <key>: expected <expected>, got '<value>'" unless an
  // earlier error is already recorded.
  void Fail(absl::string_view key, absl::string_view expected, absl::string_view value);

  const std::string engine_;
  const std::map<std::string, std::string> values_;
  const std::string what_;
  std::vector<std::string> known_;  // in the order the getters asked
  absl::Status status_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_ENGINE_PARAMS_H_
