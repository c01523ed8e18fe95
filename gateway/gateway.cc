#include "gateway/gateway.h"

#include <ctime>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/allocator.h"
#include "common/grpc/grpc_util.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/tracing/trace_metrics.h"
#include "gateway/chat/chat_call.h"
#include "gateway/chat/chat_duplex_call.h"
#include "gateway/chat/objective_headers.h"
#include "gateway/http/api_error.h"
#include "gateway/http/forwarded_headers.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

constexpr char kJson[] = "application/json";

// The transcription route's options, dialled with the gateway's orchestrator
// TLS.
TranscriptionRoute::Options TranscriptionRouteOptions(const GatewayOptions& options) {
  TranscriptionRoute::Options route = options.transcription;
  route.target.tls = options.orchestrator_tls;
  route.target.tls_name = options.orchestrator_tls_name;
  return route;
}

// --hearing_orchestrator's channels, when it names one.
std::unique_ptr<Orchestrators> HearingOrchestrators(const GatewayOptions& options,
                                                    const LoopPoster& post, Counter* fallbacks) {
  if (options.hearing_orchestrator.empty()) return nullptr;
  return std::make_unique<Orchestrators>(
      Orchestrators::Target{options.hearing_orchestrator, options.orchestrator_tls,
                            options.orchestrator_tls_name},
      post, fallbacks);
}

// Where the batch runner sends each line: chat completions to the main
// pipeline, speech to the speech route's.
BatchRunner::Options BatchRunnerOptions(const GatewayOptions& options, Orchestrators* chat,
                                        const SpeechRoute& speech) {
  BatchRunner::Options runner;
  runner.targets.chat = chat;
  runner.targets.model = options.model;
  runner.targets.speech = speech.orchestrators();
  runner.targets.speech_models = speech.models();
  runner.targets.authorization = options.batch_authorization;
  runner.concurrency = options.batch_concurrency;
  return runner;
}

}  // namespace

Gateway::Gateway(GatewayOptions options, LoopPoster post, std::unique_ptr<SqliteDatabase> store)
    : options_(std::move(options)),
      post_(std::move(post)),
      in_flight_(registry_
                     .AddGauge("omnistage_gateway_chat_completions_in_flight",
                               "Chat completions running (streamed or not).")
                     .With({})),
      http_connections_(
          registry_.AddGauge("omnistage_gateway_http_connections", "HTTP connections open.")
              .With({})),
      http_refusals_(registry_.AddCounter(
          "omnistage_gateway_http_refusals_total",
          "HTTP connections and requests the HTTP limits refused or cut before the gateway "
          "saw a request, by reason (docs/security.md).",
          {"reason"})),
      fallbacks_(registry_.AddCounter(
          "omnistage_gateway_unready_fallbacks_total",
          "Calls made once more to any orchestrator of a target, none being ready, by target "
          "(orchestrator: chat completions and Realtime; hearing_orchestrator: chat "
          "completions with audio in and Realtime, when given; speech_orchestrator: speech; "
          "transcription_orchestrator: transcriptions).",
          {"target"})),
      replies_(&registry_),
      orchestrators_(Orchestrators::Target{options_.orchestrator, options_.orchestrator_tls,
                                           options_.orchestrator_tls_name},
                     post_, &fallbacks_.With({"orchestrator"})),
      hearing_(HearingOrchestrators(options_, post_, &fallbacks_.With({"hearing_orchestrator"}))),
      store_(store != nullptr ? std::make_unique<StoreThread>(std::move(store)) : nullptr),
      realtime_(
          RealtimeRoute::Options{hearing_ != nullptr ? options_.hearing_model : options_.model,
                                 options_.max_realtime_sessions, options_.realtime,
                                 options_.tracer},
          hearing_ != nullptr ? hearing_.get() : &orchestrators_, &replies_, post_, &draining_,
          &registry_),
      console_(&orchestrators_, &replies_, store_.get(), post_),
      speech_(SpeechRoute::Options{Orchestrators::Target{options_.speech_orchestrator,
                                                         options_.orchestrator_tls,
                                                         options_.orchestrator_tls_name},
                                   options_.speech_models},
              &replies_, post_, &draining_, &fallbacks_.With({"speech_orchestrator"})),
      transcription_(TranscriptionRouteOptions(options_), &replies_, post_, &draining_,
                     &fallbacks_.With({"transcription_orchestrator"})),
      store_access_(store_ != nullptr ? std::make_unique<StoreAccess>(store_.get(), &orchestrators_,
                                                                      &replies_, post_)
                                      : nullptr),
      files_(store_access_.get(), &replies_, options_.max_file_bytes),
      batch_runner_(store_ != nullptr ? std::make_unique<BatchRunner>(
                                            BatchRunnerOptions(options_, &orchestrators_, speech_),
                                            store_.get(), post_, &registry_)
                                      : nullptr),
      batches_(BatchesRoute::Options{options_.max_batch_lines, speech_.orchestrators() != nullptr},
               store_access_.get(), batch_runner_.get(), &replies_) {
  if (batch_runner_ != nullptr) batch_runner_->Start();
  AddHeapMetrics(&registry_);
  AddTraceMetrics(&registry_, options_.tracer);
  for (HttpEvent refusal :
       {HttpEvent::kRefusedMaxConnections, HttpEvent::kRefusedMaxConnectionsPerAddress,
        HttpEvent::kRequestReadTimeout, HttpEvent::kRefusedMaxHeaders,
        HttpEvent::kRefusedBadRequest, HttpEvent::kRefusedBodyTooLarge,
        HttpEvent::kRefusedMethod}) {
    http_refusals_.With({HttpRefusalName(refusal)});  // Shown at 0.
  }
}

Gateway::~Gateway() { store_.reset(); }

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

void Gateway::Drain() {
  draining_ = true;
  post_([this] {
    realtime_.GoAway(/*now=*/false);
    if (batch_runner_ != nullptr) batch_runner_->Drain();
  });
}

void Gateway::GoAway() {
  post_([this] {
    realtime_.GoAway(/*now=*/true);
    if (batch_runner_ != nullptr) batch_runner_->Abandon();
  });
}

void Gateway::Handle(std::shared_ptr<HttpExchange> exchange) {
  const std::string& method = exchange->method();
  const std::string& path = exchange->path();
  if (method == "POST" && path == "/v1/chat/completions") {
    ChatCompletions(std::move(exchange));
  } else if (method == "GET" && path == "/v1/models") {
    nlohmann::json model = {
        {"id", options_.model.id}, {"object", "model"}, {"created", 0}, {"owned_by", "omnistage"}};
    replies_.Respond(
        *exchange, 200, kJson,
        nlohmann::json({{"object", "list"}, {"data", nlohmann::json::array({model})}}).dump());
  } else if (path == "/v1/audio/speech" || path == "/v1/audio/voices") {
    speech_.Handle(std::move(exchange));
  } else if (path == "/v1/audio/transcriptions") {
    transcription_.Handle(std::move(exchange));
  } else if (path == "/v1/files" || absl::StartsWith(path, "/v1/files/")) {
    files_.Handle(std::move(exchange));
  } else if (path == "/v1/batches" || absl::StartsWith(path, "/v1/batches/")) {
    batches_.Handle(std::move(exchange));
  } else if (path == "/v1/realtime") {
    realtime_.Handle(std::move(exchange));
  } else if (method == "GET" && path == "/health") {
    Health(std::move(exchange));
  } else if (method == "GET" && (path == "/console" || absl::StartsWith(path, "/console/"))) {
    console_.Handle(std::move(exchange));
  } else if (method == "GET" && path == "/favicon.ico") {
    // Browsers ask for it on every page (the console's): no icon, and no 404.
    replies_.Respond(*exchange, 204, "image/x-icon", "");
  } else if (method == "GET" && path == "/metrics") {
    replies_.Respond(*exchange, 200, "text/plain; version=0.0.4", registry_.Render());
  } else {
    replies_.Refuse(*exchange, "other", UnknownUrl(method, path));
  }
}

void Gateway::ChatCompletions(std::shared_ptr<HttpExchange> exchange) {
  // Audio in goes to the pipeline that hears, whose stages the request is
  // built for; a body that only names input_audio (in its text) is read again
  // for the main one.
  const std::string session = exchange->Header(kSessionIdHeader);
  bool hearing = hearing_ != nullptr && absl::StrContains(exchange->body(), "input_audio");
  std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(
      exchange->body(), hearing ? options_.hearing_model : options_.model, session);
  if (hearing && std::holds_alternative<ChatRequest>(parsed) &&
      std::get<ChatRequest>(parsed).input.empty()) {
    hearing = false;
    parsed = ParseChatRequest(exchange->body(), options_.model, session);
  }
  if (std::holds_alternative<ChatRequest>(parsed)) {
    if (std::optional<ApiError> error = ReadObjectiveHeaders(
            {exchange->Header(kSloTtftHeader), exchange->Header(kSloTpotHeader),
             exchange->Header(kSloTtfaHeader), exchange->Header(kSloCriticalityHeader)},
            &std::get<ChatRequest>(parsed).generate)) {
      parsed = *error;
    }
  }
  if (std::holds_alternative<ApiError>(parsed)) {
    const ApiError& error = std::get<ApiError>(parsed);
    replies_.Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  if (draining_) {
    const ApiError error = FromStatus(
        absl::UnavailableError("the gateway is shutting down; retry (another replica answers)"));
    replies_.Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    const ApiError& error = std::get<ApiError>(forwarded);
    replies_.Respond(*exchange, error.http_status, kJson, error.Json());
    return;
  }
  ForwardedHeaders& headers = std::get<ForwardedHeaders>(forwarded);
  in_flight_.Add(1);
  ++chat_count_;
  CallObserver observer = [this, path = exchange->path(),
                           started = absl::Now()](const CallOutcome& outcome) {
    in_flight_.Add(-1);
    --chat_count_;
    replies_.Count(path, outcome.http_status);
    replies_.Heard(path, outcome.heard);
    console_.Served(outcome, started);
  };
  ChatRequest request = std::get<ChatRequest>(std::move(parsed));
  if (!request.input.empty()) {  // Audio in: streamed to a stage that hears.
    const Orchestrators& to = hearing ? *hearing_ : orchestrators_;
    ChatDuplexCall::Start(to.ready(), to.tls(), std::move(request), options_.model.id,
                          std::move(headers.authorization), std::move(headers.trace), exchange,
                          post_, std::move(observer));
    return;
  }
  ChatCall::Start(orchestrators_.ready(), orchestrators_.fallback(), orchestrators_.tls(),
                  std::move(request), options_.model.id, std::move(headers.authorization),
                  std::move(headers.trace), exchange, post_, std::move(observer));
}

void Gateway::Health(std::shared_ptr<HttpExchange> exchange) {
  if (draining_) {
    replies_.Respond(*exchange, 503, kJson, R"({"status": "draining"})");
    return;
  }
  CheckReadiness(std::move(exchange), kReadinessAttempts, /*any=*/false);
}

void Gateway::CheckReadiness(std::shared_ptr<HttpExchange> exchange, int attempts_left, bool any) {
  struct Check {
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    grpc::health::v1::HealthCheckResponse response;
  };
  auto check = std::make_shared<Check>();
  check->context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  // Readiness: the orchestrator accepts requests and every stage has a replica.
  check->request.set_service("omnistage.v1.Orchestrator");
  orchestrators_.health(any)->async()->Check(
      &check->context, &check->request, &check->response,
      [this, check, exchange, attempts_left, any](grpc::Status status) {
        post_([this, check, exchange, attempts_left, any, status] {
          const bool serving = status.ok() && check->response.status() ==
                                                  grpc::health::v1::HealthCheckResponse::SERVING;
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
            body["reason"] = ExplainUnreachable(status.error_message(), orchestrators_.tls());
          } else if (!serving) {
            body["reason"] =
                "no orchestrator is ready: each answers NOT_SERVING (draining, or a stage "
                "has no live replica; omni status says which)";
          }
          replies_.Respond(*exchange, serving ? 200 : 503, kJson, body.dump());
        });
      });
}

}  // namespace omnistage
