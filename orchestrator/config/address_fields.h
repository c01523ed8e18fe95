// The fields of a config that say where servers are: host:port addresses and
// DNS discovery (a name looked up every refresh). Used for a stage's replicas
// and for the orchestrator's peers; errors name the field by path.
#ifndef OMNISTAGE_ORCHESTRATOR_CONFIG_ADDRESS_FIELDS_H_
#define OMNISTAGE_ORCHESTRATOR_CONFIG_ADDRESS_FIELDS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "orchestrator/config/pipeline_config.h"
#include "yaml-cpp/yaml.h"

namespace omnistage {

// A DNS name: dot-separated labels of a-z, 0-9 and '-', at most 253 characters.
bool IsDnsName(absl::string_view name);
// A non-empty list of host:port, appended to `out`.
absl::Status ReadAddresses(const YAML::Node& list, const std::string& path,
                           std::vector<std::string>* out);
// {dns, port, refresh_ms}.
absl::Status ReadDiscovery(const YAML::Node& node, const std::string& path,
                           std::optional<DnsDiscovery>* out);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CONFIG_ADDRESS_FIELDS_H_
