// Reading a YAML config with a fixed schema into typed values, with errors that
// name the field by path ("stages[1].input_mode: expected ...") and reject
// unknown and duplicate keys. yaml-cpp throws; callers catch YAML::Exception.
//
//   Fields top(root, "", {"name", "limits"});
//   top.String("name", &config.name);
//   if (!top.status().ok()) return top.status();
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_YAML_FIELDS_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_YAML_FIELDS_H_

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {
namespace yaml {

// One day: anything longer is a typo (an extra digit or two), not an intent.
inline constexpr int64_t kMaxMs = int64_t{24} * 3600 * 1000;
inline constexpr int64_t kNoMax = std::numeric_limits<int>::max();

// INVALID_ARGUMENT "<path>: <reason>" ("config" for the root).
absl::Status Invalid(absl::string_view path, absl::string_view reason);
// "path.key", the key escaped and shortened as Describe() shows values.
std::string Child(absl::string_view path, absl::string_view key);
// How a value appears in messages: a scalar quoted, shortened and escaped.
std::string Describe(const YAML::Node& node);
// "<path>: expected <what>, got <value>".
absl::Status Expected(const YAML::Node& node, absl::string_view path, absl::string_view what);
// Calls `visit` for each entry of a map, rejecting non-text and duplicate keys.
// A null node reads as an empty map.
absl::Status ForEachEntry(
    const YAML::Node& node, absl::string_view path,
    const std::function<absl::Status(const std::string&, const YAML::Node&)>& visit);
// A map of scalars, values kept as written.
absl::Status ReadStringMap(const YAML::Node& node, absl::string_view path,
                           std::map<std::string, std::string>* out);
// Checks that `text` holds exactly one YAML document (see the .cc for why this
// cannot be left to yaml-cpp 0.7). Throws YAML::Exception on syntax errors.
absl::Status CheckOneDocument(const std::string& text);
// "YAML syntax error at line L, column C: <message>".
absl::Status YamlError(const YAML::Mark& mark, absl::string_view message);

// The entries of one map whose keys the schema fixes, read key by key. Errors are
// sticky, as in EngineParams: after the first one every getter does nothing, so a
// reader reads its keys in a row and checks status() once. A getter leaves `*out`
// as it is (the default) when its key is absent, an error if it is `required`.
class Fields {
 public:
  Fields(const YAML::Node& node, std::string path, const std::vector<std::string>& known)
      : path_(std::move(path)) {
    status_ = ForEachEntry(node, path_, [&](const std::string& key, const YAML::Node& value) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        return Invalid(PathOf(key),
                       absl::StrCat("unknown key (known: ", absl::StrJoin(known, ", "), ")"));
      }
      entries_.emplace(key, value);
      return absl::OkStatus();
    });
  }

  const absl::Status& status() const { return status_; }
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  std::string PathOf(absl::string_view key) const { return Child(path_, key); }
  bool Has(const std::string& key) const { return entries_.count(key) > 0; }

  // nullptr when absent or after an error.
  const YAML::Node* Find(const std::string& key, bool required = false) {
    auto it = entries_.find(key);
    if (it == entries_.end() && required) Fail(Invalid(PathOf(key), "required"));
    return !status_.ok() || it == entries_.end() ? nullptr : &it->second;
  }

  void String(const std::string& key, std::string* out, bool required = false) {
    const YAML::Node* node = Find(key, required);
    if (node == nullptr) return;
    if (!node->IsScalar()) return Fail(Expected(*node, PathOf(key), "text"));
    *out = node->Scalar();
  }

  void Int(const std::string& key, int64_t min, int64_t max, int64_t* out,
           absl::string_view noun = "an integer") {
    const YAML::Node* node = Find(key);
    if (node == nullptr) return;
    int64_t value = 0;
    if (node->IsScalar() && absl::SimpleAtoi(node->Scalar(), &value) && value >= min &&
        value <= max) {
      *out = value;
      return;
    }
    Fail(Expected(*node, PathOf(key),
                  max == kNoMax ? absl::StrCat(noun, " >= ", min)
                                : absl::StrCat(noun, " in [", min, ", ", max, "]")));
  }

  // A finite decimal number in [min, max].
  void Number(const std::string& key, double min, double max, double* out) {
    const YAML::Node* node = Find(key);
    if (node == nullptr) return;
    double value = 0;
    if (node->IsScalar() && absl::SimpleAtod(node->Scalar(), &value) && std::isfinite(value) &&
        value >= min && value <= max) {
      *out = value;
      return;
    }
    Fail(Expected(*node, PathOf(key), absl::StrCat("a number in [", min, ", ", max, "]")));
  }

  // A duration given in whole milliseconds.
  void Millis(const std::string& key, int64_t min, absl::Duration* out) {
    int64_t ms = -1;
    Int(key, min, kMaxMs, &ms, "a number of milliseconds");
    if (ms >= 0) *out = absl::Milliseconds(ms);
  }

  void Bool(const std::string& key, bool* out) {
    const YAML::Node* node = Find(key);
    if (node == nullptr) return;
    const std::string value = node->IsScalar() ? absl::AsciiStrToLower(node->Scalar()) : "";
    if (value != "true" && value != "false") {
      return Fail(Expected(*node, PathOf(key), "true or false"));
    }
    *out = value == "true";
  }

  // One of `allowed` (at least two), spelled exactly.
  void OneOf(const std::string& key, const std::vector<std::string>& allowed, std::string* out,
             bool required = false) {
    const YAML::Node* node = Find(key, required);
    if (node == nullptr) return;
    if (node->IsScalar() &&
        std::find(allowed.begin(), allowed.end(), node->Scalar()) != allowed.end()) {
      *out = node->Scalar();
      return;
    }
    const std::vector<std::string> all_but_last(allowed.begin(), allowed.end() - 1);
    Fail(Expected(*node, PathOf(key),
                  absl::StrCat(absl::StrJoin(all_but_last, ", "), " or ", allowed.back())));
  }

  void StringMap(const std::string& key, std::map<std::string, std::string>* out) {
    if (const YAML::Node* node = Find(key)) Fail(ReadStringMap(*node, PathOf(key), out));
  }

 private:
  const std::string path_;
  std::map<std::string, YAML::Node> entries_;
  absl::Status status_;
};

}  // namespace yaml
}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_YAML_FIELDS_H_
