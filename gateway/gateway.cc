#include "gateway/gateway.h"

#include <algorithm>
#include <ctime>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/allocator.h"
#include "common/bearer_token.h"
#include "common/grpc/grpc_util.h"
#include "common/limits.h"
#include "common/log.h"
#include "gateway/http/api_error.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kJson[] = "application/json";

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

std::shared_ptr<grpc::Channel> OrchestratorChannel(const GatewayOptions& options,
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
  if (!options.orchestrator_tls_name.empty()) {
    args.SetSslTargetNameOverride(options.orchestrator_tls_name);
  }
  return grpc::CreateCustomChannel(options.orchestrator,
                                   options.orchestrator_tls.enabled()
                                       ? ChannelCredentialsFor(options.orchestrator_tls)
                                       : grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace

Gateway::Gateway(GatewayOptions options, LoopPoster post)
    : options_(std::move(options)),
      post_(std::move(post)),
      channel_(OrchestratorChannel(options_, /*ready_only=*/true)),
      // Connections of its own (made when first used): a channel that keeps
      // no health watch.
      any_channel_(OrchestratorChannel(options_, /*ready_only=*/false)),
      stub_(v1::Orchestrator::NewStub(channel_)),
      any_stub_(v1::Orchestrator::NewStub(any_channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)),
      any_health_(grpc::health::v1::Health::NewStub(any_channel_)),
      requests_(registry_.AddCounter("omnistage_gateway_requests_total",
                                     "HTTP requests answered, by route and status.",
                                     {"route", "status"})),
      in_flight_(registry_
                     .AddGauge("omnistage_gateway_chat_completions_in_flight",
                               "Chat completions running (streamed or not).")
                     .With({})),
      fallbacks_(registry_
                     .AddCounter("omnistage_gateway_unready_fallbacks_total",
                                 "Chat completions made once more to any orchestrator, "
                                 "none being ready.")
                     .With({})),
      http_connections_(registry_
                            .AddGauge("omnistage_gateway_http_connections",
                                      "HTTP connections open.")
                            .With({})),
      http_refusals_(registry_.AddCounter(
          "omnistage_gateway_http_refusals_total",
          "HTTP connections and requests the HTTP limits refused or cut before the gateway "
          "saw a request, by reason (docs/security.md).",
          {"reason"})),
      realtime_sessions_(registry_
                             .AddGauge("omnistage_gateway_realtime_sessions",
                                       "Realtime API sessions (WebSockets on /v1/realtime) open.")
                             .With({})) {
  AddHeapMetrics(&registry_);
  for (HttpEvent refusal :
       {HttpEvent::kRefusedMaxConnections, HttpEvent::kRefusedMaxConnectionsPerAddress,
        HttpEvent::kRequestReadTimeout, HttpEvent::kRefusedMaxHeaders,
        HttpEvent::kRefusedBadRequest, HttpEvent::kRefusedBodyTooLarge,
        HttpEvent::kRefusedMethod}) {
    http_refusals_.With({HttpRefusalName(refusal)});  // Shown at 0.
  }
}

void Gateway::CountHttp(HttpEvent event) {
  switch (event) {
    case HttpEvent::kConnectionOpened:
      http_connections_.Add(1);
      break;
    case HttpEvent::kConnectionClosed:
      http_connections_.Add(-1);
      break;
    default:
      http_refusals_.With({HttpRefusalName(event)}).Increment();
      break;
  }
}

void Gateway::Count(const std::string& route, int status) {
  requests_.With({route, absl::StrCat(status)}).Increment();
  // The pipeline or the orchestrator failed a client: say so (4xx are the
  // client's own, and the client was told).
  if (status >= 500) LogWarning(absl::StrCat(route, " answered HTTP ", status));
}

void Gateway::Respond(HttpExchange& exchange, int status, const std::string& content_type,
                      const std::string& body) {
  exchange.Respond(status, content_type, body);
  Count(exchange.path(), status);
}

void Gateway::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string& method = exchange->method();
  const std::string& path = exchange->path();
  if (method == "POST" && path == "/v1/chat/completions") {
    ChatCompletions(std::move(exchange));
  } else if (method == "GET" && path == "/v1/models") {
    nlohmann::json model = {{"id", options_.model.id},
                            {"object", "model"},
                            {"created", 0},
                            {"owned_by", "omnistage"}};
    Respond(*exchange, 200, kJson,
            nlohmann::json({{"object", "list"}, {"data", nlohmann::json::array({model})}}).dump());
  } else if (path == "/v1/realtime") {
    Realtime(std::move(exchange));
  } else if (method == "GET" && path == "/health") {
    Health(std::move(exchange));
  } else if (method == "GET" && (path == "/console" || absl::StartsWith(path, "/console/"))) {
    Console(std::move(exchange));
  } else if (method == "GET" && path == "/metrics") {
    Respond(*exchange, 200, "text/plain; version=0.0.4", registry_.Render());
  } else {
    ApiError error{404, "invalid_request_error",
                   absl::StrCat("Invalid URL (", method, " ", path, ")"), "", "unknown_url",
                   std::nullopt};
    exchange->Respond(404, kJson, error.Json());
    Count("other", 404);
  }
}

void Gateway::ChatCompletions(std::shared_ptr<HttpExchange> exchange) {
  std::variant<ChatRequest, ApiError> parsed =
      ParseChatRequest(exchange->body(), options_.model, exchange->Header(kSessionIdHeader));
  if (std::holds_alternative<ApiError>(parsed)) {
    const ApiError& error = std::get<ApiError>(parsed);
    Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  if (draining_) {
    const ApiError error = FromStatus(
        absl::UnavailableError("the gateway is shutting down; retry (another replica answers)"));
    Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  // Passed on as gRPC metadata, which cannot carry every byte an HTTP header
  // can: one that would be refused is a 401 here, saying why but not echoing
  // the token.
  absl::StatusOr<std::string> authorization =
      CleanAuthorization(exchange->Header("Authorization"));
  if (!authorization.ok()) {
    const ApiError error{401, "authentication_error", std::string(authorization.status().message()),
                         "", "invalid_api_key", std::nullopt};
    Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  in_flight_.Add(1);
  ++chat_count_;
  std::string traceparent = exchange->Header("traceparent");
  // A malformed one is ignored (docs/observability.md), and one with a byte
  // gRPC metadata cannot carry is malformed.
  if (TraceIdOf(traceparent).empty() ||
      !std::all_of(traceparent.begin(), traceparent.end(),
                   [](char c) { return absl::ascii_isgraph(static_cast<unsigned char>(c)); })) {
    traceparent.clear();
  }
  ChatCall::Start(stub_.get(), {any_stub_.get(), &fallbacks_}, options_.orchestrator_tls.enabled(),
                  std::get<ChatRequest>(std::move(parsed)),
                  options_.model.id, *std::move(authorization), traceparent, exchange, post_,
                  [this, path = exchange->path(),
                   started = absl::Now()](const CallOutcome& outcome) {
                    in_flight_.Add(-1);
                    --chat_count_;
                    Count(path, outcome.http_status);
                    Served(outcome, started);
                  });
}

void Gateway::AskPipelineStatus(v1::Orchestrator::Stub* stub, const std::string& authorization,
                                std::chrono::seconds timeout, StatusAnswer done) {
  struct Ask {
    grpc::ClientContext context;
    v1::PipelineStatusRequest request;
    v1::PipelineStatus status;
  };
  auto ask = std::make_shared<Ask>();
  if (!authorization.empty()) ask->context.AddMetadata("authorization", authorization);
  ask->context.set_deadline(std::chrono::system_clock::now() + timeout);
  stub->async()->GetPipelineStatus(
      &ask->context, &ask->request, &ask->status,
      [this, ask, done = std::move(done)](grpc::Status status) {
        post_([ask, done, status] { done(status, ask->status); });
      });
}

void Gateway::Health(std::shared_ptr<HttpExchange> exchange) {
  if (draining_) {
    Respond(*exchange, 503, kJson, R"({"status": "draining"})");
    return;
  }
  CheckReadiness(std::move(exchange), kReadinessAttempts, /*any=*/false);
}

void Gateway::CheckReadiness(std::shared_ptr<HttpExchange> exchange, int attempts_left,
                             bool any) {
  struct Check {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
  };
  auto check = std::make_shared<Check>();
  check->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Readiness: the orchestrator accepts requests and every stage has a replica.
  check->request.set_service("omnistage.v1.Orchestrator");
  (any ? any_health_ : health_)->async()->Check(
      &check->context, &check->request, &check->response,
      [this, check, exchange, attempts_left, any](grpc::Status status) {
        post_([this, check, exchange, attempts_left, any, status] {
          const bool serving =
              status.ok() &&
              check->response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
          // One that answers NOT_SERVING may have begun draining before the
          // channel's health watch saw it: the next call goes to the next
          // orchestrator.
          if (!serving && status.ok() && attempts_left > 1) {
            CheckReadiness(exchange, attempts_left - 1, any);
            return;
          }
          // No ready orchestrator to ask: ask any, for a reason that says more
          // than gRPC's "backend unhealthy".
          if (!status.ok() && !any) {
            CheckReadiness(exchange, 1, /*any=*/true);
            return;
          }
          nlohmann::json body = {{"status", serving ? "ok" : "unavailable"}};
          if (!status.ok()) {
            body["reason"] =
                ExplainUnreachable(status.error_message(), options_.orchestrator_tls.enabled());
          } else if (!serving) {
            body["reason"] =
                "no orchestrator is ready: each answers NOT_SERVING (draining, or a stage "
                "has no live replica; omni status says which)";
          }
          Respond(*exchange, serving ? 200 : 503, kJson, body.dump());
        });
      });
}

}  // namespace omnistage
