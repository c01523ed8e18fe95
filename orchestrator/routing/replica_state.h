// ReplicaState: what a StagePool knows of one replica (stage_pool.h).
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_STATE_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_STATE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// What the pool knows of one replica, from its handshake and its failures.
struct ReplicaState {
  std::string address;
  // Where the replica came from: "spawned", "addresses", "dns:<name>".
  std::string origin;
  // Connected and handshaken: its bound requests go on.
  bool alive = false;
  // Alive but leaving (the worker drains): picked for no new request.
  bool draining = false;
  // No longer wanted (it left discovery): picked for nothing, removed once it
  // holds no request.
  bool retiring = false;
  // Forgotten by the pool (after retiring); its index is never reused.
  bool removed = false;
  // From the last Ready.
  std::string instance_id;
  int capacity = 0;
  int64_t max_message_bytes = 0;
  // How its engine takes over a request another replica lost (failover).
  v1::ResumeMode resume = v1::RESUME_MODE_UNSPECIFIED;
  // Whether its engine takes input in pieces (Ready.streamed_input).
  v1::StreamedInput streamed_input = v1::STREAMED_INPUT_UNSPECIFIED;
  // Whether it takes playback deadlines (Ready.playback_deadlines).
  bool playback_deadlines = false;
  // Why it went down last (OK while it has not), and that reason's message
  // while it is not alive.
  absl::Status down_reason;
  std::string last_error;
  // The worker's load (every orchestrator's requests on it) as last reported,
  // when that report arrived (InfinitePast: none yet), and the requests this
  // pool sent it since then, which the report did not count yet.
  int load_requests = 0;
  absl::Time load_at = absl::InfinitePast();
  int sent_since_load = 0;
  // Of that report, the requests that were not this pool's (other
  // orchestrators' sharing the worker), as far as it can tell.
  int others_load = 0;

  // Picked for new requests: alive, not draining, not retiring.
  bool live() const { return alive && !draining && !retiring; }
  // Requests on it: its report and what was sent since.
  int64_t load() const { return int64_t{load_requests} + sent_since_load; }
  // Its capacity, at least 1 (one that reports none counts as one slot).
  int64_t slots() const { return int64_t{capacity > 0 ? capacity : 1}; }
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_REPLICA_STATE_H_
