// The registry of built-in engines: a stage config names an engine and gives it
// string parameters; this turns that into an Engine.
//
//   absl::StatusOr<std::unique_ptr<Engine>> engine =
//       CreateEngine("talker", {{"batch_size", "8"}, {"chars_per_step", "4"}});
//   if (!engine.ok()) return engine.status();  // INVALID_ARGUMENT, names the key
//
// Thread-safe (no state).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_REGISTRY_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_REGISTRY_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

// Creates engine `name` with `params`. The keys of the fault and benchmark hooks
// (fault_injection.h: fail_at_step, stamp_outputs, ...) are taken out of `params`
// first; the engine gets the rest, and comes wrapped in a FaultInjectingEngine
// when one of them turns a hook on. INVALID_ARGUMENT for an unknown engine name,
// an unknown parameter or a bad value, with a message naming it and the field
// path "engine" or "engine_params.<key>" (common/field_error.h).
absl::StatusOr<std::unique_ptr<Engine>> CreateEngine(
    const std::string& name, const std::map<std::string, std::string>& params);

// The names CreateEngine() accepts: the built-in sim_llm, listener, thinker,
// talker and vocoder (in pipeline order), then python (a Python class,
// python_engine.h).
std::vector<std::string> EngineNames();

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_REGISTRY_H_
