#include "orchestrator/config/address_fields.h"

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/host_port.h"
#include "orchestrator/config/yaml_fields.h"

namespace omnistage {
namespace {

using yaml::Expected;
using yaml::Fields;

const std::vector<std::string> kDiscoveryKeys = {"dns", "port", "refresh_ms"};
// Lookups more often than this would load the cluster's DNS for nothing.
constexpr int64_t kMinRefreshMs = 100;

}  // namespace

absl::Status ReadAddresses(const YAML::Node& list, const std::string& path,
                           std::vector<std::string>* out) {
  if (!list.IsSequence() || list.size() == 0) {
    return Expected(list, path, "a list of at least one host:port");
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string item_path = absl::StrCat(path, "[", i, "]");
    const YAML::Node item = list[i];
    if (!item.IsScalar()) return Expected(item, item_path, "text");
    if (!ParseHostPort(item.Scalar(), PortRule::kDial).ok()) {
      return Expected(item, item_path,
                      "host:port with a port in 1..65535 (e.g. 127.0.0.1:7001)");
    }
    out->push_back(item.Scalar());
  }
  return absl::OkStatus();
}

bool IsDnsName(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  if (name.back() == '.') name.remove_suffix(1);  // Fully qualified.
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-') return false;
    }
  }
  return true;
}

absl::Status ReadDiscovery(const YAML::Node& node, const std::string& path,
                           std::optional<DnsDiscovery>* out) {
  if (!node.IsMap()) return Expected(node, path, "a map with dns and port");
  Fields fields(node, path, kDiscoveryKeys);
  DnsDiscovery discovery;
  fields.String("dns", &discovery.name, /*required=*/true);
  if (fields.status().ok() && !IsDnsName(discovery.name)) {
    fields.Fail(Expected(*fields.Find("dns"), fields.PathOf("dns"),
                         "a DNS name (e.g. omnistage-talker.default.svc.cluster.local)"));
  }
  int64_t port = 0;
  if (fields.Find("port", /*required=*/true) != nullptr) fields.Int("port", 1, 65535, &port);
  discovery.port = static_cast<int>(port);
  fields.Millis("refresh_ms", kMinRefreshMs, &discovery.refresh);
  if (!fields.status().ok()) return fields.status();
  *out = std::move(discovery);
  return absl::OkStatus();
}

}  // namespace omnistage
