// Gateway's /v1/realtime route: the Realtime API's WebSocket upgrade
// (docs/openai.md, "Realtime API"). Before the 101, the client's token is put
// to the orchestrator in a GetPipelineStatus call, as a chat completion's
// would be in its Generate: UNAUTHENTICATED is a 401 in OpenAI's shape (the
// SDK's WebSocket fails to open), an admin's token also learns the stages
// (whether stage 0 echoes text responses' prompts: realtime_session.h), a
// user's is refused that call (PERMISSION_DENIED) and is let in. Whether the
// pipeline takes audio is learned from the audio's own call
// (realtime_audio_input.h), for either token.
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bearer_token.h"
#include "common/grpc/grpc_util.h"
#include "gateway/gateway.h"
#include "gateway/http/api_error.h"
#include "gateway/http/http_upgrade.h"
#include "gateway/http/websocket_handshake.h"
#include "gateway/realtime/realtime_session.h"

namespace omnistage {

namespace {
constexpr char kRoute[] = "/v1/realtime";
}  // namespace

void Gateway::Refuse(HttpExchange& exchange, const std::string& route, const ApiError& error) {
  for (const auto& [name, value] : error.Headers()) exchange.AddHeader(name, value);
  exchange.Respond(error.http_status, "application/json", error.Json());
  Count(route, error.http_status);
}

void Gateway::Drain() {
  draining_ = true;
  post_([this] { GoAwaySessions(/*now=*/false); });
}

void Gateway::GoAway() {
  post_([this] { GoAwaySessions(/*now=*/true); });
}

void Gateway::GoAwaySessions(bool now) {
  // A copy: a session may end while it is told (and leave `sessions_`).
  std::vector<std::weak_ptr<RealtimeSession>> open;
  for (const auto& [id, session] : sessions_) open.push_back(session);
  for (const auto& weak : open) {
    if (std::shared_ptr<RealtimeSession> session = weak.lock()) session->GoAway(now);
  }
}

void Gateway::Realtime(std::shared_ptr<HttpExchange> exchange) {
  const WebSocketRequest upgrade{exchange->method(), exchange->Header("Upgrade"),
                                 exchange->Header("Connection"),
                                 exchange->Header("Sec-WebSocket-Version"),
                                 exchange->Header("Sec-WebSocket-Key")};
  std::variant<std::string, ApiError> head = AcceptWebSocket(upgrade);
  if (std::holds_alternative<ApiError>(head)) {
    const ApiError& error = std::get<ApiError>(head);
    if (error.http_status == 426) exchange->AddHeader("Sec-WebSocket-Version", "13");
    Refuse(*exchange, kRoute, error);
    return;
  }
  const std::string model = exchange->QueryParam("model");
  if (!model.empty() && model != options_.model.id) {
    Refuse(*exchange, kRoute,
           ApiError{404, "invalid_request_error",
                    absl::StrCat("The model '", model, "' does not exist; this gateway serves '",
                                 options_.model.id, "'."),
                    "model", "model_not_found", std::nullopt});
    return;
  }
  if (draining_) {
    Refuse(*exchange, kRoute,
           FromStatus(absl::UnavailableError(
               "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  if (options_.max_realtime_sessions > 0 && realtime_count_ >= options_.max_realtime_sessions) {
    ApiError error = FromStatus(absl::UnavailableError(
        absl::StrCat("the gateway holds as many Realtime sessions as it takes (",
                     options_.max_realtime_sessions, "); retry later")));
    error.code = "too_many_sessions";
    Refuse(*exchange, kRoute, error);
    return;
  }
  absl::StatusOr<std::string> authorization =
      CleanAuthorization(exchange->Header("Authorization"));
  if (!authorization.ok()) {
    Refuse(*exchange, kRoute,
           ApiError{401, "authentication_error", std::string(authorization.status().message()),
                    "", "invalid_api_key", std::nullopt});
    return;
  }
  ++realtime_count_;  // Held while the token is checked.
  ++realtime_sessions_count_;
  AskPipelineStatus(stub_.get(), *authorization, std::chrono::seconds(10),
                    [this, exchange, head = std::get<std::string>(head),
                     token = *authorization](const grpc::Status& status,
                                             const v1::PipelineStatus& pipeline) {
                      --realtime_count_;
                      --realtime_sessions_count_;
                      StartRealtime(exchange, head, token, status, pipeline);
                    });
}

void Gateway::StartRealtime(std::shared_ptr<HttpExchange> exchange, const std::string& head,
                            std::string authorization, const grpc::Status& status,
                            const v1::PipelineStatus& pipeline) {
  if (exchange->done()) return;  // The client left while its token was checked.
  if (draining_) {  // Began while its token was checked.
    Refuse(*exchange, kRoute,
           FromStatus(absl::UnavailableError(
               "the gateway is shutting down; retry (another replica answers)")));
    return;
  }
  if (!status.ok() && status.error_code() != grpc::StatusCode::PERMISSION_DENIED) {
    absl::Status failed = FromGrpcStatus(status);
    if (failed.code() == absl::StatusCode::kUnavailable) {
      failed = absl::UnavailableError(ExplainUnreachable(std::string(failed.message()),
                                                         options_.orchestrator_tls.enabled()));
    }
    Refuse(*exchange, kRoute, FromStatus(failed));
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
  Count(kRoute, 101);
  ++realtime_count_;
  ++realtime_sessions_count_;
  realtime_sessions_.Add(1);
  const uint64_t id = next_session_++;
  RealtimeSession::Backend backend;
  backend.stub = stub_.get();
  backend.fallback = {any_stub_.get(), &fallbacks_};
  backend.post = post_;
  backend.responses = [this](int delta) { realtime_responses_count_ += delta; };
  backend.ended = [this, id] {
    --realtime_count_;
    --realtime_sessions_count_;
    realtime_sessions_.Add(-1);
    sessions_.erase(id);
  };
  std::shared_ptr<RealtimeSession> session =
      RealtimeSession::Start(std::move(upgrade), options_.realtime, options_.model,
                             std::move(backend), std::move(authorization), stage0_echoes);
  if (session != nullptr) sessions_.emplace(id, session);
}

}  // namespace omnistage
