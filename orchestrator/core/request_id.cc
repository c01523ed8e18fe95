#include "orchestrator/core/request_id.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/random_id.h"

namespace omnistage {
namespace {

constexpr size_t kNodeIdDigits = 12;
constexpr size_t kRandomDigits = 32;
constexpr absl::string_view kPrefix = "req-";

bool IsLowerHex(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
  });
}

}  // namespace

std::string NewNodeId() { return RandomHex(kNodeIdDigits / 2); }

bool IsNodeId(absl::string_view node) {
  return node.size() == kNodeIdDigits && IsLowerHex(node);
}

std::string GeneratedRequestId(absl::string_view node) {
  std::string id = absl::StrCat(kPrefix, RandomHex(kRandomDigits / 2));
  if (!node.empty()) absl::StrAppend(&id, ".", node);
  return id;
}

std::optional<std::string> OwnerNodeOf(absl::string_view id) {
  if (id.size() != kPrefix.size() + kRandomDigits + 1 + kNodeIdDigits ||
      !absl::StartsWith(id, kPrefix)) {
    return std::nullopt;
  }
  const absl::string_view random = id.substr(kPrefix.size(), kRandomDigits);
  const absl::string_view node = id.substr(kPrefix.size() + kRandomDigits + 1);
  if (id[kPrefix.size() + kRandomDigits] != '.' || !IsLowerHex(random) || !IsNodeId(node)) {
    return std::nullopt;
  }
  return std::string(node);
}

}  // namespace omnistage
