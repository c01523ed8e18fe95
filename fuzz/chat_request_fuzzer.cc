// Fuzz target: the gateway's reading of an OpenAI chat-completions body
// (gateway/chat/chat_request.h) on arbitrary bytes.
//
// Properties, for every input:
// - ParseChatRequest returns (no crash, no exception escapes, no hang);
// - a refusal is 400 (or 404 for another model) of type invalid_request_error
//   with a message, and its body is a JSON object {"error": {message, type,
//   param, code}} — what the SDKs parse;
// - an accepted request is one the orchestrator can run as sent: a non-empty
//   prompt, at least one output modality and no other than text and audio,
//   parameters only for the text stage and within their documented ranges.
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>

#include "fuzz/fuzz_check.h"
#include "gateway/chat/chat_request.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

// Text from stage 2, the voice to stage 1.
const ServedModel kModel{"omni-demo", 2, 1};

void CheckRefusal(const ApiError& error) {
  FUZZ_CHECK(error.http_status == 400 || error.http_status == 404, "HTTP ", error.http_status,
             " for a bad body");
  FUZZ_CHECK(error.type == "invalid_request_error", "error type '", error.type, "'");
  FUZZ_CHECK(!error.message.empty(), "a refusal without a message");
  const nlohmann::json body = nlohmann::json::parse(error.Json(), nullptr, false);
  FUZZ_CHECK(!body.is_discarded() && body.is_object() && body.contains("error"),
             "an error body that is not {\"error\": ...}: ", error.Json());
  for (const char* key : {"message", "type", "param", "code"}) {
    FUZZ_CHECK(body["error"].contains(key), "an error body without '", key, "'");
  }
}

void CheckAccepted(const ChatRequest& request) {
  const v1::GenerateRequest& generate = request.generate;
  FUZZ_CHECK(!generate.prompt().empty(), "an empty prompt accepted");
  FUZZ_CHECK(generate.request_id().empty(), "the gateway chose a request id");
  FUZZ_CHECK(generate.output_modalities_size() >= 1 && generate.output_modalities_size() <= 2,
             generate.output_modalities_size(), " output modalities");
  for (int m : generate.output_modalities()) {
    FUZZ_CHECK(m == v1::MODALITY_TEXT || m == v1::MODALITY_AUDIO, "modality ", m);
  }
  FUZZ_CHECK(request.text || request.audio, "neither text nor audio");
  FUZZ_CHECK(request.stream || !request.include_usage, "include_usage without stream");
  FUZZ_CHECK(generate.stage_params_size() <= 2, generate.stage_params_size(), " stage params");
  bool seen[2] = {false, false};
  for (const v1::StageParameters& params : generate.stage_params()) {
    const bool voice = params.stage_id() == kModel.voice_stage;
    FUZZ_CHECK(voice || params.stage_id() == kModel.text_stage, "params for stage ",
               params.stage_id());
    FUZZ_CHECK(!seen[voice], "two params for stage ", params.stage_id());
    seen[voice] = true;
    if (voice) {
      FUZZ_CHECK(request.audio, "a voice without audio");
      FUZZ_CHECK(params.extra().size() == 1 && params.extra().count("voice") == 1 &&
                     !params.extra().at("voice").empty(),
                 "voice stage extras ", params.extra().size());
      FUZZ_CHECK(!params.has_max_tokens() && !params.has_seed() && !params.has_temperature(),
                 "text parameters on the voice stage");
      continue;
    }
    FUZZ_CHECK(!params.has_max_tokens() ||
                   (params.max_tokens() >= 1 && params.max_tokens() <= 1000000),
               "max_tokens ", params.max_tokens());
    FUZZ_CHECK(!params.has_temperature() ||
                   (params.temperature() >= 0 && params.temperature() <= 2),
               "temperature ", params.temperature());
    FUZZ_CHECK(params.extra().empty(), "engine extras from a chat request");
  }
}

}  // namespace
}  // namespace omnistage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  std::variant<omnistage::ChatRequest, omnistage::ApiError> parsed =
      omnistage::ParseChatRequest(body, omnistage::kModel);
  if (std::holds_alternative<omnistage::ApiError>(parsed)) {
    omnistage::CheckRefusal(std::get<omnistage::ApiError>(parsed));
  } else {
    omnistage::CheckAccepted(std::get<omnistage::ChatRequest>(parsed));
  }
  return 0;
}
