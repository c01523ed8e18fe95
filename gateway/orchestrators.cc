#include "gateway/orchestrators.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc/grpc_util.h"
#include "common/limits.h"

namespace omnistage {
namespace {

// How calls spread over the orchestrators the target names (a DNS name with an
// A record per orchestrator, or ipv4:HOST:PORT,HOST:PORT): round robin, and a
// Generate refused with UNAVAILABLE before any answer (an orchestrator began
// draining before its health said so, or has no live first stage) is tried
// again on the next one; once a response has come it never is.
constexpr char kRoundRobinWithRetries[] = R"(
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "omnistage.v1.Orchestrator", "method": "Generate"}],
    "retryPolicy": {
      "maxAttempts": 4,
      "initialBackoff": "0.02s",
      "maxBackoff": "0.2s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE"]
    }
  }])";
// The main channel sends calls only to orchestrators whose readiness
// (grpc.health.v1, service omnistage.v1.Orchestrator) is SERVING, watched on
// each connection: a draining one gets no new calls while its streams go on.
constexpr char kReadyOnly[] =
    R"("healthCheckConfig": {"serviceName": "omnistage.v1.Orchestrator"},)";

std::shared_ptr<grpc::Channel> OrchestratorChannel(const Orchestrators::Target& target,
                                                   bool ready_only) {
  grpc::ChannelArguments args;
  // Audio responses can be large (common/limits.h).
  args.SetMaxReceiveMessageSize(kMaxReceivedResponseBytes);
  args.SetServiceConfigJSON(
      absl::StrCat("{", ready_only ? kReadyOnly : "", kRoundRobinWithRetries, "}"));
  // The config above is the gateway's own, not one a DNS TXT record may set.
  args.SetInt(GRPC_ARG_SERVICE_CONFIG_DISABLE_RESOLUTION, 1);
  // gRPC looks the name up again when a connection goes (an orchestrator
  // ended, or asked its clients to reconnect: limits.max_connection_age_ms),
  // at most this often (its default is 30 s): orchestrators added to DNS are
  // found at the next such event.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 1000);
  if (!target.tls_name.empty()) {
    args.SetSslTargetNameOverride(target.tls_name);
  }
  return grpc::CreateCustomChannel(
      target.address,
      target.tls.enabled() ? ChannelCredentialsFor(target.tls) : grpc::InsecureChannelCredentials(),
      args);
}

}  // namespace

Orchestrators::Orchestrators(const Target& target, LoopPoster post, Counter* fallbacks)
    : tls_(target.tls.enabled()),
      post_(std::move(post)),
      channel_(OrchestratorChannel(target, /*ready_only=*/true)),
      any_channel_(OrchestratorChannel(target, /*ready_only=*/false)),
      stub_(v1::Orchestrator::NewStub(channel_)),
      any_stub_(v1::Orchestrator::NewStub(any_channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)),
      any_health_(grpc::health::v1::Health::NewStub(any_channel_)),
      fallbacks_(fallbacks) {}

ApiError Orchestrators::Refusal(const grpc::Status& status) const {
  absl::Status failed = FromGrpcStatus(status);
  if (failed.code() == absl::StatusCode::kUnavailable) {
    failed = absl::UnavailableError(ExplainUnreachable(std::string(failed.message()), tls_));
  }
  return FromStatus(failed);
}

void Orchestrators::AskPipelineStatus(v1::Orchestrator::Stub* stub,
                                      const std::string& authorization,
                                      std::chrono::seconds timeout, StatusAnswer done) {
  struct Ask {
    grpc::ClientContext context;
    v1::PipelineStatusRequest request;
    v1::PipelineStatus status;
  };
  auto ask = std::make_shared<Ask>();
  if (!authorization.empty()) ask->context.AddMetadata("authorization", authorization);
  ask->context.set_deadline(std::chrono::system_clock::now() + timeout);
  stub->async()->GetPipelineStatus(&ask->context, &ask->request, &ask->status,
                                   [this, ask, done = std::move(done)](grpc::Status status) {
                                     post_([ask, done, status] { done(status, ask->status); });
                                   });
}

void Orchestrators::AskCaller(v1::Orchestrator::Stub* stub, const std::string& authorization,
                              std::chrono::seconds timeout, CallerAnswer done) {
  struct Ask {
    grpc::ClientContext context;
    v1::GetCallerRequest request;
    v1::CallerInfo caller;
  };
  auto ask = std::make_shared<Ask>();
  if (!authorization.empty()) ask->context.AddMetadata("authorization", authorization);
  ask->context.set_deadline(std::chrono::system_clock::now() + timeout);
  stub->async()->GetCaller(&ask->context, &ask->request, &ask->caller,
                           [this, ask, done = std::move(done)](grpc::Status status) {
                             post_([ask, done, status] { done(status, ask->caller); });
                           });
}

}  // namespace omnistage
