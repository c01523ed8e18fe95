#include "gateway/realtime_route.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gateway/http/api_error.h"
#include "gateway/http/forwarded_headers.h"
#include "gateway/http/http_upgrade.h"
#include "gateway/http/websocket_handshake.h"
#include "gateway/realtime/realtime_session.h"

namespace omnistage {
namespace {

constexpr char kRoute[] = "/v1/realtime";

}  // namespace

RealtimeRoute::RealtimeRoute(Options options, Orchestrators* orchestrators, RouteReplies* replies,
                             LoopPoster post, const std::atomic<bool>* draining,
                             MetricsRegistry* registry)
    : options_(std::move(options)),
      orchestrators_(orchestrators),
      replies_(replies),
      post_(std::move(post)),
      draining_(draining),
      open_gauge_(registry
                      ->AddGauge("omnistage_gateway_realtime_sessions",
                                 "Realtime API sessions (WebSockets on /v1/realtime) open.")
                      .With({})) {}

void RealtimeRoute::GoAway(bool now) {
  // A copy: a session may end while it is told (and leave `sessions_`).
  std::vector<std::weak_ptr<RealtimeSession>> open;
  for (const auto& [id, session] : sessions_) open.push_back(session);
  for (const auto& weak : open) {
    if (std::shared_ptr<RealtimeSession> session = weak.lock()) session->GoAway(now);
  }
}

void RealtimeRoute::Handle(std::shared_ptr<HttpExchange> exchange) {
  const WebSocketRequest upgrade{
      exchange->method(), exchange->Header("Upgrade"), exchange->Header("Connection"),
      exchange->Header("Sec-WebSocket-Version"), exchange->Header("Sec-WebSocket-Key")};
  std::variant<std::string, ApiError> head = AcceptWebSocket(upgrade);
  if (std::holds_alternative<ApiError>(head)) {
    const ApiError& error = std::get<ApiError>(head);
    if (error.http_status == 426) exchange->AddHeader("Sec-WebSocket-Version", "13");
    replies_->Refuse(*exchange, kRoute, error);
    return;
  }
  const std::string model = exchange->QueryParam("model");
  if (!model.empty() && model != options_.model.id) {
    replies_->Refuse(
        *exchange, kRoute,
        ApiError{404, "invalid_request_error",
                 absl::StrCat("The model '", model, "' does not exist; this gateway serves '",
                              options_.model.id, "'."),
                 "model", "model_not_found", std::nullopt});
    return;
  }
  if (*draining_) {
    replies_->Refuse(*exchange, kRoute,
                     FromStatus(absl::UnavailableError(
                         "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  if (options_.max_sessions > 0 && open_ >= options_.max_sessions) {
    ApiError error = FromStatus(absl::UnavailableError(
        absl::StrCat("the gateway holds as many Realtime sessions as it takes (",
                     options_.max_sessions, "); retry later")));
    error.code = "too_many_sessions";
    replies_->Refuse(*exchange, kRoute, error);
    return;
  }
  std::variant<ForwardedHeaders, ApiError> forwarded = ForwardedHeadersOf(*exchange);
  if (std::holds_alternative<ApiError>(forwarded)) {
    replies_->Refuse(*exchange, kRoute, std::get<ApiError>(forwarded));
    return;
  }
  const std::string authorization = std::get<ForwardedHeaders>(forwarded).authorization;
  const TraceHeaders trace = std::get<ForwardedHeaders>(forwarded).trace;
  ++open_;  // Held while the token is checked.
  ++sessions_count_;
  orchestrators_->AskPipelineStatus(
      orchestrators_->ready(), authorization, std::chrono::seconds(10),
      [this, exchange, head = std::get<std::string>(head), token = authorization, trace](
          const grpc::Status& status, const v1::PipelineStatus& pipeline) {
        --open_;
        --sessions_count_;
        Start(exchange, head, token, trace, status, pipeline);
      });
}

void RealtimeRoute::Start(std::shared_ptr<HttpExchange> exchange, const std::string& head,
                          std::string authorization, TraceHeaders trace, const grpc::Status& status,
                          const v1::PipelineStatus& pipeline) {
  if (exchange->done()) return;  // The client left while its token was checked.
  if (*draining_) {              // Began while its token was checked.
    replies_->Refuse(*exchange, kRoute,
                     FromStatus(absl::UnavailableError(
                         "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  if (!status.ok() && status.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
    replies_->Refuse(*exchange, kRoute, orchestrators_->Refusal(status));
    return;
  }
  // A stage 0 that shows the client text while a later stage answers in text
  // too (the voice agent's listener, which passes typed text through).
  bool stage0_echoes = false;
  for (int i = 1; status.ok() && i < pipeline.stages_size(); ++i) {
    const auto is_text = [](const v1::StageStatus& s) {
      return s.final_output() && s.output_modality() == v1::MODALITY_TEXT;
    };
    if (is_text(pipeline.stages(0)) && is_text(pipeline.stages(i))) stage0_echoes = true;
  }
  std::unique_ptr<HttpUpgrade> upgrade = exchange->Upgrade(head);
  if (upgrade == nullptr) return;
  replies_->Count(kRoute, 101);
  ++open_;
  ++sessions_count_;
  open_gauge_.Add(1);
  const uint64_t id = next_session_++;
  RealtimeSession::Backend backend;
  backend.stub = orchestrators_->ready();
  backend.fallback = orchestrators_->fallback();
  backend.post = post_;
  backend.tracer = options_.tracer;
  backend.responses = [this](int delta) { responses_count_ += delta; };
  backend.heard = [this](const PlaybackFigures& figures) { replies_->Heard(kRoute, figures); };
  backend.ended = [this, id] {
    --open_;
    --sessions_count_;
    open_gauge_.Add(-1);
    sessions_.erase(id);
  };
  std::shared_ptr<RealtimeSession> session = RealtimeSession::Start(
      std::move(upgrade), options_.limits, options_.model, std::move(backend),
      std::move(authorization), std::move(trace), stage0_echoes);
  if (session != nullptr) sessions_.emplace(id, session);
}

}  // namespace omnistage
