#include "stage_worker/engines/registry.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/field_error.h"
#include "stage_worker/engines/base/fault_injection.h"
#include "stage_worker/engines/models/listener.h"
#include "stage_worker/engines/models/sim_llm.h"
#include "stage_worker/engines/models/talker.h"
#include "stage_worker/engines/models/thinker.h"
#include "stage_worker/engines/models/vocoder.h"
#include "stage_worker/engines/python/python_engine.h"

namespace omnistage {
namespace {

using Factory =
    absl::StatusOr<std::unique_ptr<Engine>> (*)(const std::map<std::string, std::string>&);

struct Registration {
  const char* name;
  Factory create;
};

// A fixed table rather than self-registering static initializers: the set of
// built-in engines is known at compile time, and this cannot be dropped by the
// linker or run in an unspecified order.
constexpr Registration kEngines[] = {
    {kSimLlmEngineName, &CreateSimLlmEngine},
    {kListenerEngineName, &CreateListenerEngine},
    {kThinkerEngineName, &CreateThinkerEngine},
    {kTalkerEngineName, &CreateTalkerEngine},
    {kVocoderEngineName, &CreateVocoderEngine},
    {kPythonEngineName, &CreatePythonEngine},
};

}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(
    const std::string& name, const std::map<std::string, std::string>& params) {
  for (const Registration& engine : kEngines) {
    if (name != engine.name) continue;
    // The fault and benchmark hooks are the decorator's: the engine never sees
    // their keys.
    std::map<std::string, std::string> own = params;
    absl::StatusOr<FaultOptions> faults = TakeFaultOptions(name, &own);
    if (!faults.ok()) return AtField(faults.status(), "engine_params");
    absl::StatusOr<std::unique_ptr<Engine>> created = engine.create(own);
    if (!created.ok()) return AtField(created.status(), "engine_params");
    return WithFaults(name, *faults, *std::move(created));
  }
  return AtField(absl::InvalidArgumentError(absl::StrCat("unknown engine '", name, "' (known: ",
                                                         absl::StrJoin(EngineNames(), ", "), ")")),
                 "engine");
}

std::vector<std::string> EngineNames() {
  std::vector<std::string> names;
  for (const Registration& engine : kEngines) names.emplace_back(engine.name);
  return names;
}

}  // namespace omnistage
