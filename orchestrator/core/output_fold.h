// FoldOutputs: one RequestOutput per request per worker event.
//
// A worker merges the step outputs that queue behind a write in flight into one
// event, so one event often carries several consecutive outputs of the same
// request. The core handles each output as a unit (a client write, a hand-off
// to the next stage, a table lookup), so folding them first does that work once
// per event instead of once per step. Folding keeps what a client and the next
// stage see: a request's payloads in order, tokens appended to tokens and text to
// text (both are deltas "to be appended to what came before"), audio and raw
// payloads left whole; the finish, if any, on the folded output.
//
//   v1::StepOutputs step = ...;   // a, b, a, a(finished), b
//   FoldOutputs(&step);           // a(finished), b — payloads in order
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_OUTPUT_FOLD_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_OUTPUT_FOLD_H_

#include "protos/stage_worker.pb.h"

namespace omnistage {

// Folds each request's outputs in `step` into its first one, in place. Requests
// keep the order of their first outputs. An output after a finished one of the
// same id (which a worker never sends) is left as it is.
void FoldOutputs(v1::StepOutputs* step);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_OUTPUT_FOLD_H_
