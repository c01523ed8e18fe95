// A chat completion's latency objectives from its headers, as the Gateway API
// Inference Extension and llm-d spell the first two (docs/openai.md,
// "Latency objectives"): `x-slo-ttft-ms`, the time to the first token (any
// output), `x-slo-tpot-ms`, the mean time per output token after it, and
// omnistage's `x-slo-ttfa-ms`, the time to the first audio, each a whole
// number of milliseconds, 1..600000; and `x-slo-criticality`: critical,
// standard or sheddable. They become GenerateRequest.objectives.
//
//   if (auto error = ReadObjectiveHeaders({exchange->Header(kSloTtftHeader), ...},
//                                         &generate)) ...
#ifndef OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_
#define OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_

#include <optional>
#include <string>

#include "gateway/http/api_error.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

inline constexpr char kSloTtftHeader[] = "x-slo-ttft-ms";
inline constexpr char kSloTpotHeader[] = "x-slo-tpot-ms";
inline constexpr char kSloTtfaHeader[] = "x-slo-ttfa-ms";
inline constexpr char kSloCriticalityHeader[] = "x-slo-criticality";

// The headers' values, "" when absent.
struct ObjectiveHeaderValues {
  std::string ttft_ms;
  std::string tpot_ms;
  std::string ttfa_ms;
  std::string criticality;
};

// Sets `request`'s objectives from the headers' values; a 400 naming the
// header when a time is not a whole number in 1..600000 or the criticality
// is none of critical, standard and sheddable.
std::optional<ApiError> ReadObjectiveHeaders(const ObjectiveHeaderValues& values,
                                             v1::GenerateRequest* request);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CHAT_OBJECTIVE_HEADERS_H_
