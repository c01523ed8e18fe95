// What GET /console/status answers (docs/console.md): the orchestrator's
// GetPipelineStatus as protobuf's JSON mapping (lowerCamelCase names, enums by
// name, zeros printed, so the page reads every field without defaults of its
// own), beside the gateway's record of the chat completions it served:
//
//   {"pipeline": {"stages": [...], "inFlightRequests": 0, "recent": [...], ...},
//    "gateway": {"servedTotal": 12, "recent": [{"requestId": "req-...",
//                "outcome": "stop", "error": "", "httpStatus": 200,
//                "durationSeconds": 0.8, "finishedUnixMs": 1700000000000}]}}
//
// Pure: no I/O.
#ifndef OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_
#define OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_

#include <string>

#include "gateway/console/served_requests.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

std::string ConsoleStatusJson(const v1::PipelineStatus& pipeline, const ServedRequests& served);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_
