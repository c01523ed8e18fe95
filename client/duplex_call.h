// RunDuplex: one GenerateDuplex call from the CLI (omni speak, omni listen):
// the request first, then the input a feeder writes on its own thread while
// the responses are read on the caller's, Ctrl-C cancelling the call.
#ifndef OMNISTAGE_CLIENT_DUPLEX_CALL_H_
#define OMNISTAGE_CLIENT_DUPLEX_CALL_H_

#include <atomic>
#include <functional>

#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

// Writes one input message; false once the call takes no more.
using SendInput = std::function<bool(const v1::GenerateInput& message)>;
// Writes the input through `send`, returning when it is complete (the call is
// then half-closed) or early once `stop` (the responses ended).
using FeedInput = std::function<void(const SendInput& send, const std::atomic<bool>& stop)>;

// Runs the call on `context` (its deadline and metadata set); `on_response`
// sees each response. Returns the call's status.
grpc::Status RunDuplex(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
                       v1::GenerateRequest request, const FeedInput& feed,
                       const std::function<void(const v1::GenerateResponse&)>& on_response,
                       const std::atomic<bool>& interrupted);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_DUPLEX_CALL_H_
