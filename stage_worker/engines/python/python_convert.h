// Conversions between the worker's protobuf messages and the plain Python
// values a Python engine sees. Plain types rather than generated protobuf
// classes: a step's 64 outputs cost a Python engine 5.5 us to build as tuples
// and lists, 220 us as serialized messages (docs/benchmarks.md), and an engine
// needs no protobuf import to run.
//
//   Payload         Python
//   text            str
//   tokens          list[int]
//   raw             bytes
//   audio           dict(pcm_s16le=bytes, sample_rate_hz=int, channels=int)
//
//   StageParameters dict(max_tokens=int|None, seed=int|None,
//                        temperature=float|None, extra=dict[str, str])
//   (a request's)   the same, and produced=list of payloads: what it already
//                   produced when it resumes by continuation
//                   (EngineRequest.produced, engine.h); else []
//   Value           None, bool, float (numbers), str, list, dict
//
// A step's outputs are a list of tuples (request_id, payloads[, finish[,
// message]]): `payloads` a list of the values above, `finish` None while the
// request goes on, else "stop", "length", "abort" or "error" (with `message`
// saying why; an error output carries code INTERNAL).
//
// Every function needs the GIL.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CONVERT_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/struct.pb.h"
#include "protos/common.pb.h"
#include "protos/stage_worker.pb.h"
#include "stage_worker/engines/base/engine.h"
#include "stage_worker/engines/python/python_runtime.h"

namespace omnistage {

pybind11::list PayloadsToPython(const std::vector<v1::Payload>& payloads);
pybind11::dict ParamsToPython(const v1::StageParameters& params);
// The params dict validate and add get: ParamsToPython() and "produced".
pybind11::dict RequestParamsToPython(const EngineRequest& request);
pybind11::list ListToPython(const google::protobuf::ListValue& list);

// INVALID_ARGUMENT naming what in `value` is not a JSON-like value.
absl::StatusOr<google::protobuf::Value> ValueFromPython(pybind11::handle value);
// INVALID_ARGUMENT naming the output and what in it is malformed.
absl::StatusOr<std::vector<v1::RequestOutput>> OutputsFromPython(pybind11::handle outputs);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_PYTHON_PYTHON_CONVERT_H_
