#include "gateway/batch_line.h"

#include <utility>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "gateway/chat/chat_call.h"
#include "gateway/http/api_error.h"
#include "gateway/speech/speech_call.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

// The line of the output or error file for a request that was answered
// `status` with `body` (OpenAI's batch output shape).
std::string ResultLine(const std::string& custom_id, int status, const std::string& request_id,
                       nlohmann::json body) {
  return nlohmann::json{
      {"id", absl::StrCat("batch_req_", RandomHex(12))},
      {"custom_id", custom_id},
      {"response",
       {{"status_code", status}, {"request_id", request_id}, {"body", std::move(body)}}},
      {"error", nullptr}}
      .dump();
}

// What a line's call answered, kept once its reply ended.
struct Answered {
  int status = 0;
  std::string content_type;
  std::string body;
  bool closed = false;
};

// What a recorded answer comes to. A speech answer's audio is carried as
// base64 in a JSON body (a JSONL file holds no raw bytes).
BatchLineOutcome OutcomeOf(const ClaimedLine& line, const Answered& reply,
                           const std::string& request_id) {
  BatchLineOutcome outcome;
  outcome.status = reply.status;
  if (reply.closed) {
    outcome.kind = BatchLineOutcome::Kind::kAbandoned;
    return outcome;
  }
  // Full, out of reach, or the gateway's own token refused (its operator
  // fixes that; the batch goes on).
  if (reply.status == 401 || reply.status == 429 || reply.status == 503 || reply.status == 504) {
    outcome.kind = BatchLineOutcome::Kind::kRetry;
    outcome.reason = reply.body.substr(0, 300);
    return outcome;
  }
  nlohmann::json body = nlohmann::json::parse(reply.body, nullptr, /*allow_exceptions=*/false);
  if (reply.status == 200 && line.endpoint == "/v1/audio/speech") {
    body = {{"object", "audio.speech"},
            {"content_type", reply.content_type},
            {"audio", absl::Base64Escape(reply.body)}};
  } else if (body.is_discarded()) {
    body = {{"text", reply.body}};
  }
  outcome.kind =
      reply.status == 200 ? BatchLineOutcome::Kind::kDone : BatchLineOutcome::Kind::kFailed;
  if (outcome.kind == BatchLineOutcome::Kind::kFailed) outcome.reason = reply.body.substr(0, 300);
  outcome.result = ResultLine(line.custom_id, reply.status, request_id, std::move(body));
  return outcome;
}

}  // namespace

std::shared_ptr<RecordedReply> RunBatchLine(const ClaimedLine& line, const BatchTargets& targets,
                                            LoopPoster post,
                                            std::function<void(BatchLineOutcome)> done) {
  // The orchestrator's request id, which the observer hears before the reply
  // ends.
  auto request_id = std::make_shared<std::string>();
  // The outcome is made on the loop's next turn: a call tells its observer
  // (the request id) just after its reply ended.
  auto reply = std::make_shared<RecordedReply>(
      post, [line, request_id, done, post](const RecordedReply& recorded) {
        post([line, request_id, done,
              answered = Answered{recorded.status(), recorded.content_type(), recorded.body(),
                                  recorded.closed()}] {
          done(OutcomeOf(line, answered, *request_id));
        });
      });
  CallObserver observer = [request_id](const CallOutcome& outcome) {
    *request_id = outcome.request_id;
  };
  const auto refuse = [&](const ApiError& error) {
    post([reply, error] { reply->Respond(error.http_status, "application/json", error.Json()); });
    return reply;
  };
  const bool speech = line.endpoint == "/v1/audio/speech";
  if (speech && targets.speech == nullptr) {
    return refuse(NotServed("This gateway serves no speech (--speech_orchestrator)."));
  }
  if (speech) {
    std::variant<SpeechRequest, ApiError> parsed =
        ParseSpeechRequest(line.body, targets.speech_models);
    if (std::holds_alternative<ApiError>(parsed)) return refuse(std::get<ApiError>(parsed));
    SpeechRequest request = std::get<SpeechRequest>(std::move(parsed));
    request.sse = false;  // the whole audio, one result
    request.generate.set_batch(true);
    request.generate.set_on_behalf_of(line.owner);
    SpeechCall::Start(targets.speech->ready(), targets.speech->fallback(), targets.speech->tls(),
                      std::move(request), targets.speech_models.voice_stage, targets.authorization,
                      TraceHeaders{}, reply, std::move(post), std::move(observer));
    return reply;
  }
  std::variant<ChatRequest, ApiError> parsed = ParseChatRequest(line.body, targets.model);
  if (std::holds_alternative<ApiError>(parsed)) return refuse(std::get<ApiError>(parsed));
  ChatRequest request = std::get<ChatRequest>(std::move(parsed));
  if (!request.input.empty()) {
    return refuse(InvalidRequest("messages", "A batch line takes no input_audio."));
  }
  request.stream = false;  // the whole completion, one result
  request.generate.set_batch(true);
  request.generate.set_on_behalf_of(line.owner);
  ChatCall::Start(targets.chat->ready(), targets.chat->fallback(), targets.chat->tls(),
                  std::move(request), targets.model.id, targets.authorization, TraceHeaders{},
                  reply, std::move(post), std::move(observer));
  return reply;
}

}  // namespace omnistage
