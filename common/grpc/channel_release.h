// ReleaseChannelLater: lets go of a channel a grace period after its last
// call ended, not at once.
//
// gRPC C++ runs a call's last callback (a reactor's OnDone, a unary call's
// callback) before it releases the call, and the call holds the channel's
// callback completion queue. An owner that waits for those callbacks and then
// destroys the channel at once can free that queue while a gRPC thread has yet
// to release the call: a double free in grpc_cq_internal_unref (found under
// AddressSanitizer at an orchestrator's stop, with worker streams ending as it
// stopped). Handing the channel here instead keeps it until `grace` has
// passed: it is released by a later ReleaseChannelLater call, and the ones
// still held when the process exits are never destroyed.
//
//   Shutdown();                                  // every call's callback ran
//   ReleaseChannelLater(std::move(channel_));
//
// Thread-safe.
#ifndef OMNISTAGE_COMMON_GRPC_CHANNEL_RELEASE_H_
#define OMNISTAGE_COMMON_GRPC_CHANNEL_RELEASE_H_

#include <memory>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace omnistage {

inline constexpr absl::Duration kChannelReleaseGrace = absl::Seconds(1);

void ReleaseChannelLater(std::shared_ptr<grpc::Channel> channel,
                         absl::Duration grace = kChannelReleaseGrace);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_GRPC_CHANNEL_RELEASE_H_
