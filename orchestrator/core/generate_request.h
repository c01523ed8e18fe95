// A Generate request read against the pipeline it is for: whether it may run,
// the parameters each stage runs it with, and the in-flight request it becomes.
// Pure functions.
//
//   absl::Status s = ValidateGenerateRequest(config, request);  // INVALID_ARGUMENT, names the field
//   v1::StageParameters p = StageParamsFor(config, request, 1);  // defaults, then overrides
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_GENERATE_REQUEST_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_GENERATE_REQUEST_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/request_table.h"
#include "orchestrator/core/response_sink.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// OK, or INVALID_ARGUMENT naming the field and the reason: request_id (length,
// characters, the generated form req-<32 hex>.<12 hex>), prompt (empty, over
// limits.max_prompt_bytes), output_modalities (unknown, or produced by no final
// stage), stage_params (no such stage, a stage twice, max_tokens or temperature
// out of range). Engine-specific parameters are checked by the workers. With
// `streamed_input` (GenerateDuplex) the prompt may be empty: input follows.
absl::Status ValidateGenerateRequest(const PipelineConfig& config,
                                     const v1::GenerateRequest& request,
                                     bool streamed_input = false);

// The config fields a GenerateDuplex request's refusals name when a limit
// ended it (its Error's `field`, common/field_error.h), so that clients such
// as the gateway tell them apart without reading messages.
inline constexpr char kInputChunkLimitField[] = "limits.max_input_chunk_bytes";
inline constexpr char kInputBytesLimitField[] = "limits.max_input_bytes";
inline constexpr char kInputIdleLimitField[] = "limits.input_idle_ms";

// A later message of a GenerateDuplex call, read against the limits: OK, or
// INVALID_ARGUMENT saying what is wrong, at the field it is about (`request`:
// it carries a request and not input; `input.payloads[i]...`: a payload with
// no content, audio whose bytes are no whole samples, or whose rate or
// channels are out of range; kInputChunkLimitField: a chunk over the limit;
// kInputBytesLimitField: past the limit with the `streamed_before` bytes that
// came before it). `*bytes` is what it adds to the request's input.
absl::Status ValidateInputMessage(const PipelineConfig& config, const v1::GenerateInput& message,
                                  int64_t streamed_before, int64_t* bytes);

// Stage `stage`'s defaults from the config, overridden field by field by the
// request's stage_params for it.
v1::StageParameters StageParamsFor(const PipelineConfig& config,
                                   const v1::GenerateRequest& request, int stage);

// The in-flight request `request` (valid) becomes under `id`: which stages stream
// to the client (the final stages of the asked-for modalities), the last stage it
// needs, each stage's parameters; its admission and last activity are `now`.
std::unique_ptr<InFlightRequest> NewInFlightRequest(const PipelineConfig& config,
                                                    const v1::GenerateRequest& request,
                                                    const std::string& id,
                                                    std::shared_ptr<ResponseSink> sink,
                                                    absl::Time now);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_GENERATE_REQUEST_H_
