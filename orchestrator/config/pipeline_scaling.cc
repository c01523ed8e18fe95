#include "orchestrator/config/pipeline_scaling.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "orchestrator/config/yaml_fields.h"

namespace omnistage {

absl::Status ReadScaling(const YAML::Node& node, ScalingConfig* scaling) {
  yaml::Fields fields(node, "scaling", {"target_utilization_percent", "window_ms", "sample_ms"});
  int64_t target = scaling->target_utilization_percent;
  fields.Int("target_utilization_percent", 1, 100, &target);
  // A sample at most once every 100 ms: the signal moves in seconds.
  fields.Millis("sample_ms", 100, &scaling->sample_interval);
  fields.Millis("window_ms", 100, &scaling->window);
  if (!fields.status().ok()) return fields.status();
  if (scaling->window < scaling->sample_interval) {
    return yaml::Invalid(
        "scaling.window_ms",
        absl::StrCat("must be >= sample_ms (", absl::ToInt64Milliseconds(scaling->sample_interval),
                     "), got ", absl::ToInt64Milliseconds(scaling->window)));
  }
  scaling->target_utilization_percent = static_cast<int>(target);
  return absl::OkStatus();
}

}  // namespace omnistage
