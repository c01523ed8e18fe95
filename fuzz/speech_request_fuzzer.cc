// Fuzz target: the gateway's reading of an OpenAI speech body (POST
// /v1/audio/speech, gateway/speech/speech_request.h) on arbitrary bytes.
//
// Properties, for every input:
// - ParseSpeechRequest returns (no crash, no exception escapes, no hang);
// - a refusal is 400 (or 404 naming `model`, for a model not served) of type
//   invalid_request_error with a message, and its body is a JSON object
//   {"error": {message, type, param, code}};
// - an accepted request is a JSON object naming a served model, whose `input`
//   is the prompt (1 to kMaxSpeechInputChars code points), with a served
//   format, a speed in 0.25..4, a non-empty voice, and a Generate asking for
//   audio alone with one set of parameters, for the voice stage: its `voice`,
//   and `speed` exactly when the speed is not 1.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "gateway/speech/speech_request.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

const SpeechModels& Models() {
  static const auto* const models = new SpeechModels{{"tts-1", "tts-1-hd", "gpt-4o-mini-tts"}, 1};
  return *models;
}

size_t CodePoints(const std::string& text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  }));
}

void CheckRefusal(const ApiError& error) {
  FUZZ_CHECK(error.http_status == 400 || error.http_status == 404, "HTTP ", error.http_status,
             " for a bad body");
  FUZZ_CHECK(error.http_status != 404 || error.param == "model", "a 404 about '", error.param, "'");
  FUZZ_CHECK(error.type == "invalid_request_error", "error type '", error.type, "'");
  FUZZ_CHECK(!error.message.empty(), "a refusal without a message");
  const nlohmann::json body = nlohmann::json::parse(error.Json(), nullptr, false);
  FUZZ_CHECK(!body.is_discarded() && body.is_object() && body.contains("error") &&
                 body["error"].is_object(),
             "an error body that is not {\"error\": {...}}: ", error.Json());
  for (const char* key : {"message", "type", "param", "code"}) {
    FUZZ_CHECK(body["error"].contains(key), "an error body without '", key, "'");
  }
}

void CheckAccepted(const std::string& text, const SpeechRequest& request) {
  // What was accepted was a JSON object with these fields.
  const nlohmann::json body = nlohmann::json::parse(text, nullptr, false);
  FUZZ_CHECK(!body.is_discarded() && body.is_object(), "accepted a body that is not an object");
  FUZZ_CHECK(body.contains("model") && body["model"].is_string(), "accepted without a model");
  const std::string model = body["model"].get<std::string>();
  FUZZ_CHECK(std::find(Models().names.begin(), Models().names.end(), model) != Models().names.end(),
             "accepted model '", model, "'");
  FUZZ_CHECK(body.contains("input") && body["input"].is_string() &&
                 body["input"].get<std::string>() == request.generate.prompt(),
             "the prompt is not the input");

  const v1::GenerateRequest& generate = request.generate;
  const size_t chars = CodePoints(generate.prompt());
  FUZZ_CHECK(chars >= 1 && chars <= kMaxSpeechInputChars, "a prompt of ", chars, " characters");
  FUZZ_CHECK(generate.request_id().empty(), "the gateway chose a request id");
  // The formats the header documents.
  const std::string& format = request.format;
  FUZZ_CHECK(
      format == "mp3" || format == "opus" || format == "flac" || format == "wav" || format == "pcm",
      "format '", format, "'");
  const bool named = body.contains("response_format") && !body["response_format"].is_null();
  FUZZ_CHECK(format == (named ? body["response_format"].get<std::string>() : "mp3"), "format '",
             format, "' not the one asked for");
  FUZZ_CHECK(request.speed >= 0.25 && request.speed <= 4.0, "speed ", request.speed);
  FUZZ_CHECK(!request.voice.empty(), "an empty voice accepted");
  FUZZ_CHECK(request.sse == (body.contains("stream_format") && body["stream_format"] == "sse"),
             "sse ", request.sse);
  FUZZ_CHECK(
      generate.output_modalities_size() == 1 && generate.output_modalities(0) == v1::MODALITY_AUDIO,
      "output modalities other than audio alone");
  FUZZ_CHECK(generate.stage_params_size() == 1, generate.stage_params_size(), " stage params");
  const v1::StageParameters& params = generate.stage_params(0);
  FUZZ_CHECK(params.stage_id() == Models().voice_stage, "params for stage ", params.stage_id());
  FUZZ_CHECK(!params.has_max_tokens() && !params.has_seed() && !params.has_temperature(),
             "text parameters on the voice stage");
  FUZZ_CHECK(params.extra().count("voice") == 1 && !params.extra().at("voice").empty(),
             "no voice for the voice stage");
  const bool speed = request.speed != 1.0;
  FUZZ_CHECK(params.extra().count("speed") == (speed ? 1u : 0u) &&
                 params.extra().size() == (speed ? 2u : 1u),
             "voice stage extras ", params.extra().size(), " for speed ", request.speed);
}

}  // namespace
}  // namespace omnistage

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  std::variant<omnistage::SpeechRequest, omnistage::ApiError> parsed =
      omnistage::ParseSpeechRequest(body, omnistage::Models());
  if (std::holds_alternative<omnistage::ApiError>(parsed)) {
    omnistage::CheckRefusal(std::get<omnistage::ApiError>(parsed));
  } else {
    omnistage::CheckAccepted(body, std::get<omnistage::SpeechRequest>(parsed));
  }
  return 0;
}
