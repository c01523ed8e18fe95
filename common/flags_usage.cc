#include "common/flags_usage.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace omnistage {

void SetUsage(const std::string& usage, const std::string& flags_file) {
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  auto ours = [flags_file](absl::string_view file) { return absl::EndsWith(file, flags_file); };
  config.contains_help_flags = ours;
  config.contains_helpshort_flags = ours;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace omnistage
