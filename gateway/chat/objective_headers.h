// A chat completion's latency objectives from its headers, as the Gateway API
// Inference Extension spells the first (docs/openai.md, "Latency
// objectives"): `x-slo-ttft-ms`, the time to the first token (any output),
// and omnistage's `x-slo-ttfa-ms`, the time to the first audio; each a whole
// number of milliseconds, 1..600000. They become GenerateRequest.objectives.
//
//   if (auto error = ReadObjectiveHeaders(exchange->Header(kSloTtftHeader),
//                                         exchange->Header(kSloTtfaHeader), &generate)) ...
#ifndef OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_
#define OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_

#include <optional>
#include <string>

#include "gateway/http/api_error.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

inline constexpr char kSloTtftHeader[] = "x-slo-ttft-ms";
inline constexpr char kSloTtfaHeader[] = "x-slo-ttfa-ms";

// Sets `request`'s objectives from the headers' values ("" when absent); a
// 400 naming the header when one is not a whole number in 1..600000.
std::optional<ApiError> ReadObjectiveHeaders(const std::string& ttft_ms, const std::string& ttfa_ms,
                                             v1::GenerateRequest* request);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_
