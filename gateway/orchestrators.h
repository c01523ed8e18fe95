// Orchestrators: the gateway's gRPC channels to the orchestrators one target
// names (host:port, a DNS name listing several, or ipv4:A,B).
//
// Calls go round robin over the ready ones: the main channel watches each
// connection's readiness (grpc.health.v1, service omnistage.v1.Orchestrator)
// and sends nothing to one that is not SERVING, so a draining orchestrator
// gets no new calls while its streams go on. A Generate refused with
// UNAVAILABLE before any answer is tried again on the next one. When none is
// ready, a call is made once more through a fallback channel over all of them
// (counted: omnistage_gateway_unready_fallbacks_total{target}), for an answer
// that says why.
#ifndef OMNISTAGE_GATEWAY_ORCHESTRATORS_H_
#define OMNISTAGE_GATEWAY_ORCHESTRATORS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "common/grpc/tls.h"
#include "common/metrics.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/api_error.h"
#include "grpcpp/grpcpp.h"
#include "protos/health.grpc.pb.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class Orchestrators {
 public:
  struct Target {
    std::string address = "127.0.0.1:50051";
    // Plaintext when empty; a client certificate when cert/key are set.
    TlsFiles tls;
    // The name the orchestrators' certificates must carry, when it is not the
    // host dialled.
    std::string tls_name;
  };

  // `post` runs tasks on the gateway's loop; `fallbacks` (not owned) counts
  // the calls made once more through the fallback channel.
  Orchestrators(const Target& target, LoopPoster post, Counter* fallbacks);

  // Round robin over the ready orchestrators.
  v1::Orchestrator::Stub* ready() const { return stub_.get(); }
  // Any orchestrator, ready or not (connections of its own, made when first
  // used).
  v1::Orchestrator::Stub* any() const { return any_stub_.get(); }
  // What a call makes once more when no orchestrator is ready.
  CallFallback fallback() { return {any_stub_.get(), fallbacks_}; }
  // Readiness checks, through the ready channel or (`any`) the other.
  grpc::health::v1::Health::Stub* health(bool any) const {
    return any ? any_health_.get() : health_.get();
  }
  bool tls() const { return tls_; }
  // The answer for a call to these orchestrators that failed: the
  // orchestrator's status in OpenAI's shape, and for one out of reach, gRPC's
  // reason with the fix it points to (ExplainUnreachable).
  ApiError Refusal(const grpc::Status& status) const;

  // Asks `stub` for the pipeline's status with the client's `authorization`
  // (passed on: the orchestrator decides whether that token may see it), for
  // up to `timeout`; `done` runs on the loop with the call's status and the
  // answer.
  using StatusAnswer = std::function<void(const grpc::Status&, const v1::PipelineStatus&)>;
  void AskPipelineStatus(v1::Orchestrator::Stub* stub, const std::string& authorization,
                         std::chrono::seconds timeout, StatusAnswer done);
  // Asks `stub` whom the client's `authorization` stands for (GetCaller),
  // for up to `timeout`; `done` runs on the loop with the call's status and
  // the answer.
  using CallerAnswer = std::function<void(const grpc::Status&, const v1::CallerInfo&)>;
  void AskCaller(v1::Orchestrator::Stub* stub, const std::string& authorization,
                 std::chrono::seconds timeout, CallerAnswer done);

 private:
  const bool tls_;
  const LoopPoster post_;
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> any_channel_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  std::unique_ptr<v1::Orchestrator::Stub> any_stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::unique_ptr<grpc::health::v1::Health::Stub> any_health_;
  Counter* const fallbacks_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_ORCHESTRATORS_H_
