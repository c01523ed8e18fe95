// What GET /console/status answers (docs/console.md): the orchestrator's
// GetPipelineStatus as protobuf's JSON mapping (lowerCamelCase names, enums by
// name, zeros printed, so the page reads every field without defaults of its
// own), beside the gateway's record of the chat completions it served:
//
//   {"pipeline": {"stages": [...], "inFlightRequests": 0, "recent": [...], ...},
//    "gateway": {"servedTotal": 12, "recent": [{"requestId": "req-...",
//                "outcome": "stop", "error": "", "httpStatus": 200,
//                "durationSeconds": 0.8, "finishedUnixMs": 1700000000000}]},
//    "batches": [{"id": "batch_...", "owner": "alice", "endpoint": "...",
//                 "status": "in_progress", "createdAt": 1700000000,
//                 "total": 100, "completed": 40, "failed": 1}]}
// ("batches": null when the gateway keeps none: no --batch_database).
//
// Pure: no I/O.
#ifndef OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_
#define OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_

#include <string>
#include <vector>

#include "gateway/batch/batch_store.h"
#include "gateway/console/served_requests.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// `batches`: the batches not finished (null: the gateway keeps none).
std::string ConsoleStatusJson(const v1::PipelineStatus& pipeline, const ServedRequests& served,
                              const std::vector<StoredBatch>* batches = nullptr);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_CONSOLE_CONSOLE_STATUS_H_
