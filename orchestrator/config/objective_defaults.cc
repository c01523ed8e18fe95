#include "orchestrator/config/objective_defaults.h"

#include "common/criticality.h"
#include "common/limits.h"
#include "orchestrator/config/yaml_fields.h"

namespace omnistage {

absl::Status ReadObjectiveDefaults(const YAML::Node& node, const std::string& path,
                                   ObjectiveDefaults* defaults) {
  yaml::Fields fields(node, path,
                      {"first_output_ms", "first_audio_ms", "between_outputs_ms", "criticality"});
  int64_t first_output = defaults->first_output_ms;
  int64_t first_audio = defaults->first_audio_ms;
  int64_t between_outputs = defaults->between_outputs_ms;
  fields.Int("first_output_ms", 0, kMaxObjectiveMs, &first_output, "a number of milliseconds");
  fields.Int("first_audio_ms", 0, kMaxObjectiveMs, &first_audio, "a number of milliseconds");
  fields.Int("between_outputs_ms", 0, kMaxObjectiveMs, &between_outputs,
             "a number of milliseconds");
  defaults->first_output_ms = static_cast<uint32_t>(first_output);
  defaults->first_audio_ms = static_cast<uint32_t>(first_audio);
  defaults->between_outputs_ms = static_cast<uint32_t>(between_outputs);
  if (const YAML::Node* criticality = fields.Find("criticality")) {
    std::optional<v1::Criticality> parsed =
        criticality->IsScalar() ? ParseCriticality(criticality->Scalar()) : std::nullopt;
    if (!parsed.has_value()) {
      return yaml::Expected(*criticality, fields.PathOf("criticality"),
                            "critical, standard or sheddable");
    }
    defaults->criticality = *parsed;
  }
  return fields.status();
}

}  // namespace omnistage
