#include "tests/pipeline_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/host_port.h"

namespace omnistage {

std::string PipelineConfigYaml(const PipelineSpec& spec,
                               const std::vector<std::vector<std::string>>& addresses) {
  std::string yaml =
      absl::StrCat("name: ", spec.name, "\n",                                                  //
                   "keepalive_ms: ", spec.keepalive_ms, "\n",                                  //
                   "keepalive_timeout_ms: ", spec.keepalive_timeout_ms, "\n",                  //
                   "request_idle_timeout_ms: ", spec.request_idle_timeout_ms, "\n",            //
                   "reconnect_initial_backoff_ms: ", spec.reconnect_initial_backoff_ms, "\n",  //
                   "reconnect_max_backoff_ms: ", spec.reconnect_max_backoff_ms, "\n",          //
                   "drain_timeout_ms: ", spec.drain_timeout_ms, "\n");
  if (spec.worker_abort_timeout_ms > 0) {
    absl::StrAppend(&yaml, "worker_abort_timeout_ms: ", spec.worker_abort_timeout_ms, "\n");
  }
  if (spec.max_prompt_bytes > 0 || spec.max_client_queued_bytes > 0 || !spec.limits.empty()) {
    std::vector<std::string> limits = spec.limits;
    if (spec.max_prompt_bytes > 0) {
      limits.push_back(absl::StrCat("max_prompt_bytes: ", spec.max_prompt_bytes));
    }
    if (spec.max_client_queued_bytes > 0) {
      limits.push_back(absl::StrCat("max_client_queued_bytes: ", spec.max_client_queued_bytes));
    }
    absl::StrAppend(&yaml, "limits: {", absl::StrJoin(limits, ", "), "}\n");
  }
  if (!spec.peers.empty()) absl::StrAppend(&yaml, "peers: ", spec.peers, "\n");
  if (!spec.scaling.empty()) absl::StrAppend(&yaml, "scaling: ", spec.scaling, "\n");
  absl::StrAppend(&yaml, "stages:\n");
  for (size_t s = 0; s < spec.stages.size(); ++s) {
    const StageSpec& stage = spec.stages[s];
    absl::StrAppend(&yaml, "  - name: ", stage.name, "\n",  //
                    "    engine: ", stage.engine, "\n");
    if (!stage.dns_name.empty()) {
      const std::string& first = addresses[s].at(0);
      absl::StrAppend(&yaml, "    discovery: {dns: ", stage.dns_name,
                      ", port: ", ParseHostPort(first, PortRule::kDial)->port,
                      ", refresh_ms: ", stage.refresh_ms, "}\n");
    } else {
      std::vector<std::string> quoted;
      for (const std::string& address : addresses[s]) {
        quoted.push_back(absl::StrCat("\"", address, "\""));
      }
      absl::StrAppend(&yaml, "    addresses: [", absl::StrJoin(quoted, ", "), "]\n");
    }
    absl::StrAppend(&yaml, "    final_output: ", stage.final_output ? "true" : "false", "\n",  //
                    "    output_modality: ", stage.output_modality, "\n");
    // The first stage takes the prompt; its input mode means nothing.
    if (s > 0) absl::StrAppend(&yaml, "    input_mode: ", stage.input_mode, "\n");
    if (!stage.defaults.empty()) absl::StrAppend(&yaml, "    defaults: ", stage.defaults, "\n");
    if (!stage.pick.empty()) absl::StrAppend(&yaml, "    pick: ", stage.pick, "\n");
    if (!stage.prefix.empty()) absl::StrAppend(&yaml, "    prefix: ", stage.prefix, "\n");
    if (stage.failover_max_attempts > 0) {
      absl::StrAppend(&yaml, "    failover: {max_attempts: ", stage.failover_max_attempts, "}\n");
    }
  }
  return yaml;
}

}  // namespace omnistage
