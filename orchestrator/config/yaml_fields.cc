#include "orchestrator/config/yaml_fields.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/eventhandler.h"

namespace omnistage {
namespace yaml {
namespace {

constexpr size_t kMaxQuotedChars = 64;

// Text from the file as a message shows it: escaped (it may hold anything, line
// breaks and control characters too) and shortened.
std::string Shown(absl::string_view text) {
  const bool shortened = text.size() > kMaxQuotedChars;
  return absl::StrCat(absl::CHexEscape(text.substr(0, kMaxQuotedChars)), shortened ? "..." : "");
}

// Records where each document starts, ignoring the rest.
class DocumentStarts : public YAML::EventHandler {
 public:
  const std::vector<YAML::Mark>& starts() const { return starts_; }

  void OnDocumentStart(const YAML::Mark& mark) override { starts_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  std::vector<YAML::Mark> starts_;
};

}  // namespace

absl::Status Invalid(absl::string_view path, absl::string_view reason) {
  return absl::InvalidArgumentError(absl::StrCat(path.empty() ? "config" : path, ": ", reason));
}

// Keys name fields in messages, and an unknown one comes from the file as is.
std::string Child(absl::string_view path, absl::string_view key) {
  return path.empty() ? Shown(key) : absl::StrCat(path, ".", Shown(key));
}

// How a value appears in messages: a scalar quoted (shortened and escaped, since
// it may be anything), anything else by its kind.
std::string Describe(const YAML::Node& node) {
  if (node.IsScalar()) return absl::StrCat("'", Shown(node.Scalar()), "'");
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a map";
  return "null";
}

absl::Status Expected(const YAML::Node& node, absl::string_view path, absl::string_view what) {
  return Invalid(path, absl::StrCat("expected ", what, ", got ", Describe(node)));
}

// Calls `visit` for each entry of a map, rejecting non-text and duplicate keys
// (yaml-cpp keeps both entries of a duplicate, and a silently shadowed key is
// exactly the kind of typo a loader must catch). A null value (an empty "limits:")
// reads as an empty map.
absl::Status ForEachEntry(
    const YAML::Node& node, absl::string_view path,
    const std::function<absl::Status(const std::string&, const YAML::Node&)>& visit) {
  if (node.IsNull()) return absl::OkStatus();
  if (!node.IsMap()) return Expected(node, path, "a map");
  std::vector<std::string> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    if (!it->first.IsScalar() || it->first.Scalar().empty()) {
      return Expected(it->first, path, "text keys");
    }
    const std::string& key = it->first.Scalar();
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return Invalid(Child(path, key), "given twice");
    }
    seen.push_back(key);
    absl::Status status = visit(key, it->second);
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// A map of scalars (engine_params, extra), values kept as written.
absl::Status ReadStringMap(const YAML::Node& node, absl::string_view path,
                           std::map<std::string, std::string>* out) {
  return ForEachEntry(node, path, [&](const std::string& key, const YAML::Node& value) {
    if (!value.IsScalar()) return Expected(value, Child(path, key), "a single value");
    (*out)[key] = value.Scalar();
    return absl::OkStatus();
  });
}

// yaml-cpp's messages may quote the character it choked on, whatever it is:
// what is not printable is escaped (the message's own quotes stay).
absl::Status YamlError(const YAML::Mark& mark, absl::string_view message) {
  std::string shown;
  for (char c : message) {
    if (absl::ascii_isprint(static_cast<unsigned char>(c))) {
      shown.push_back(c);
    } else {
      absl::StrAppend(&shown, "\\x", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    }
  }
  if (mark.is_null()) return Invalid("", absl::StrCat("YAML error: ", shown));
  return absl::InvalidArgumentError(absl::StrCat("YAML syntax error at line ", mark.line + 1,
                                                 ", column ", mark.column + 1, ": ", shown));
}

// Checks that `text` holds exactly one document. yaml-cpp 0.7 cannot be asked
// directly: on a token that cannot start a node (a stray ',') its parser emits an
// empty document without consuming the token, so YAML::LoadAll() never returns and
// YAML::Load() silently ignores everything from there on. Looking at no more than
// three documents keeps this bounded; two starting at the same place mean that
// stuck token. Throws YAML::Exception on syntax errors.
absl::Status CheckOneDocument(const std::string& text) {
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  DocumentStarts documents;
  while (documents.starts().size() < 3 && parser.HandleNextDocument(documents)) {
  }
  const std::vector<YAML::Mark>& starts = documents.starts();
  if (starts.empty()) return Invalid("", "empty; expected a map with at least the key 'stages'");
  if (starts.size() == 1) return absl::OkStatus();
  if (starts.size() == 3 && starts[1].pos == starts[2].pos) {
    const char unexpected = starts[1].pos >= 0 && static_cast<size_t>(starts[1].pos) < text.size()
                                ? text[starts[1].pos]
                                : '?';
    return YamlError(
        starts[1], absl::StrCat("unexpected '", absl::CHexEscape(std::string(1, unexpected)), "'"));
  }
  return Invalid("", absl::StrCat("expected one YAML document, got another at line ",
                                  starts[1].line + 1, " (after '---' or '...')"));
}

}  // namespace yaml
}  // namespace omnistage
