// What a Python engine's class declares besides the methods every engine has
// (python_engine.h): how many requests it runs, and how it takes over a
// request another replica lost (its prefix cache: python_prefix_cache.h).
// Each is read once, at start; a bad value
// refuses the engine with INVALID_ARGUMENT, its message naming the class and
// the value (CreatePythonEngine reports it at engine_params.class).
//
// Every function needs the GIL.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CLASS_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CLASS_H_

#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/engines/python/python_runtime.h"

namespace omnistage {

// The instance's `capacity`: an int in [1, 65536], or a method returning it.
// `qualified` names the class ("module.Class").
absl::StatusOr<int> ReadCapacity(const pybind11::object& instance, const std::string& qualified);

// The class attribute `resume`: how the engine takes over a lost request.
// Read from the class, before the constructor loads anything, so that a typo
// costs no model load.
absl::StatusOr<ResumeMode> ReadResume(const pybind11::object& cls, const std::string& qualified);

// The class attribute `streamed_input`: "whole" (the default: append_input
// collects the pieces), "incremental" (it starts on the first piece) or "none"
// (the worker refuses input in pieces for it).
absl::StatusOr<StreamedInput> ReadStreamedInput(const pybind11::object& cls,
                                                const std::string& qualified);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CLASS_H_
