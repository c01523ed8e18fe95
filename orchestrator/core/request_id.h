// The request ids an orchestrator generates name it: "req-<32 hex>.<node id>",
// where the node id (12 hex digits, drawn at start) tags the orchestrator
// process. A peer that receives an Abort for such an id knows where to forward
// it without asking anyone else (abort_router.h). Client-chosen ids carry no
// owner; the generated form is reserved for generated ids.
//
//   std::string node = NewNodeId();
//   std::string id = GeneratedRequestId(node);       // "req-9f0c...e1.a1b2c3d4e5f6"
//   OwnerNodeOf(id) == node;                          // true
//   OwnerNodeOf("my-own-id").has_value();             // false
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_ID_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_ID_H_

#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace omnistage {

// 12 lowercase hex digits of randomness: one orchestrator process.
std::string NewNodeId();
// True for a node id NewNodeId() could have made.
bool IsNodeId(absl::string_view node);
// 128 random bits, tagged with `node` when it is not empty.
std::string GeneratedRequestId(absl::string_view node);
// The node id of a generated, tagged id; nullopt for any other id.
std::optional<std::string> OwnerNodeOf(absl::string_view request_id);

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_REQUEST_ID_H_
