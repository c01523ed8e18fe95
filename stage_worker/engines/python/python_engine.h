// python: a stage engine written in Python, run by an embedded CPython.
//
// The worker's busy loop stays the C++ EngineCore, with all its semantics; this
// adapter turns each Engine call into a call on an instance of the user's
// class, on the busy-loop thread only. gRPC threads never touch Python:
// Validate() does only the checks that need no interpreter, and the class's
// own validate runs on the loop as ValidateInLoop(), right before add.
//
// Parameters: `module` (the module to import) and `class` (the engine class in
// it), `path` (optional: ':'-separated directories put in front of sys.path).
// Every other parameter goes, as a dict of strings, to the class's constructor.
//
// The class implements (python_convert.h gives the value types):
//   __init__(self, params: dict[str, str])    raise ValueError on a bad one
//   capacity                                  int, or a method returning it
//   validate(self, request_id, inputs, complete, params)   raise to reject
//   add(self, request_id, inputs, complete, params)
//   append_input(self, request_id, chunks, last)
//   abort(self, request_ids)
//   has_work(self) -> bool
//   step(self) -> list of outputs
//   utility(self, name, args) -> value
//   load(self) -> (running, waiting)          optional (metrics)
//   resume = "replay" | "continuation"        optional class attribute: how it
//                                             takes over a request another
//                                             replica lost (Engine::resume_mode());
//                                             absent or None: it cannot
//   prefix_cache                              optional: (block_tokens,
//                                             capacity_blocks) or a method
//                                             returning it; with one:
//   prefix_cache_stats(self) -> (blocks, hit_tokens, miss_tokens)
//   take_cache_changes(self) -> [(block, stored)]   optional
//                                             (python_prefix_cache.h)
// A continuation engine finds what the request already produced in
// params["produced"] (python_convert.h); docs/engines.md#failover.
// Errors: an exception from validate rejects that request (INVALID_ARGUMENT,
// its message; a `field` attribute names the field); from utility, fails that
// call (ValueError/TypeError: INVALID_ARGUMENT, NotImplementedError:
// UNIMPLEMENTED, else INTERNAL); from any other method it is fatal, and the
// reason carries the exception and its traceback.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_ENGINE_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_ENGINE_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kPythonEngineName[] = "python";

// INVALID_ARGUMENT at field "module", "class" or "<param>" when the module does
// not import, the class or one of its methods is missing, its `resume` is not
// one of the values above, its prefix_cache is malformed, or the constructor
// refuses a parameter; the message names module, class and method (or
// attribute).
absl::StatusOr<std::unique_ptr<Engine>> CreatePythonEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_ENGINE_H_
