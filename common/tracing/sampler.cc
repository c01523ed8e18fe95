#include "common/tracing/sampler.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace omnistage {

absl::StatusOr<Sampler> Sampler::Parse(absl::string_view name, absl::string_view arg) {
  const std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  bool parent_based = true;
  Root root = Root::kAlwaysOn;
  if (lower.empty() || lower == "parentbased_always_on") {
  } else if (lower == "parentbased_always_off") {
    root = Root::kAlwaysOff;
  } else if (lower == "parentbased_traceidratio") {
    root = Root::kRatio;
  } else if (lower == "always_on") {
    parent_based = false;
  } else if (lower == "always_off") {
    parent_based = false;
    root = Root::kAlwaysOff;
  } else if (lower == "traceidratio") {
    parent_based = false;
    root = Root::kRatio;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown trace sampler '", name,
                     "': one of always_on, always_off, traceidratio, parentbased_always_on, "
                     "parentbased_always_off, parentbased_traceidratio"));
  }
  double ratio = 1;
  if (root == Root::kRatio && !absl::StripAsciiWhitespace(arg).empty() &&
      (!absl::SimpleAtod(absl::StripAsciiWhitespace(arg), &ratio) || !(ratio >= 0 && ratio <= 1))) {
    return absl::InvalidArgumentError(
        absl::StrCat("the trace sampler's ratio '", arg, "' is not a number from 0 to 1"));
  }
  return Sampler(parent_based, root, ratio);
}

bool Sampler::Sample(const TraceContext* parent, absl::string_view trace_id) const {
  if (parent != nullptr && parent_based_) return parent->sampled();
  switch (root_) {
    case Root::kAlwaysOn:
      return true;
    case Root::kAlwaysOff:
      return false;
    case Root::kRatio:
      break;
  }
  if (ratio_ >= 1) return true;
  // The trace id's last 8 bytes (random in a W3C id), top bit dropped,
  // against the ratio of 2^63.
  uint64_t x = 0;
  for (size_t i = trace_id.size() >= 8 ? trace_id.size() - 8 : 0; i < trace_id.size(); ++i) {
    x = (x << 8) | static_cast<uint8_t>(trace_id[i]);
  }
  x &= ~(uint64_t{1} << 63);
  return static_cast<double>(x) < ratio_ * 9223372036854775808.0;
}

std::string Sampler::Describe() const {
  const char* root = root_ == Root::kAlwaysOn    ? "always_on"
                     : root_ == Root::kAlwaysOff ? "always_off"
                                                 : "traceidratio";
  std::string out = absl::StrCat(parent_based_ ? "parentbased_" : "", root);
  if (root_ == Root::kRatio) absl::StrAppend(&out, " ", ratio_);
  return out;
}

}  // namespace omnistage
