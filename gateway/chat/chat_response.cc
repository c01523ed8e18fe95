#include "gateway/chat/chat_response.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/error_proto.h"
#include "common/wav_writer.h"
#include "nlohmann/json.hpp"

namespace omnistage {
int64_t WordCount(const std::string& text) {
  int64_t words = 0;
  for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
    (void)word;
    ++words;
  }
  return words;
}

namespace {

using nlohmann::json;

const char* FinishReason(v1::FinishReason reason) {
  return reason == v1::FINISH_REASON_LENGTH ? "length" : "stop";
}

bool FinishedWell(const v1::Terminal& terminal) {
  return terminal.finish_reason() == v1::FINISH_REASON_STOP ||
         terminal.finish_reason() == v1::FINISH_REASON_LENGTH;
}

std::string Event(const json& data) { return absl::StrCat("data: ", data.dump(), "\n\n"); }

}  // namespace

ChatEncoder::ChatEncoder(const ChatRequest& request, std::string model, int64_t created)
    : text_(request.text),
      audio_(request.audio),
      audio_format_(request.audio_format),
      include_usage_(request.include_usage),
      voice_stage_(request.voice_stage),
      text_stage_(request.text_stage),
      model_(std::move(model)),
      created_(created),
      prompt_tokens_(WordCount(request.generate.prompt())) {}

ApiError TerminalApiError(const v1::Terminal& terminal) {
  if (terminal.finish_reason() != v1::FINISH_REASON_ERROR) {
    ApiError aborted = FromStatus(absl::AbortedError("the request was aborted"));
    aborted.code = "aborted";
    return aborted;
  }
  return FromStatus(StatusFromErrorProto(terminal.error()));
}

ApiError ChatEncoder::TerminalError(const v1::Terminal& terminal) const {
  ApiError refused = TerminalApiError(terminal);
  const v1::Error& error = terminal.error();
  // The worker names the field of its request ("params.extra.voice"); the
  // client wrote audio.voice.
  if (voice_stage_ >= 0 && error.stage_id() == voice_stage_ &&
      error.field() == "params.extra.voice") {
    refused.param = "audio.voice";
  }
  return refused;
}

std::string ChatEncoder::ChunkEvent(const std::string& delta_fields, const char* finish_reason) {
  // Built as text around the one part that changes: an event per text piece
  // is the gateway's hottest path (a JSON tree per event cost ~60 us).
  if (prefix_.empty()) {
    prefix_ = absl::StrCat(
        R"(data: {"id":)", json(id_).dump(), R"(,"object":"chat.completion.chunk","created":)",
        created_, R"(,"model":)", json(model_).dump(), R"(,"choices":[{"index":0,"delta":{)");
  }
  std::string event = prefix_;
  event += delta_fields;
  if (!role_sent_) {
    if (!delta_fields.empty()) event += ',';
    event += R"("role":"assistant")";
    role_sent_ = true;
  }
  absl::StrAppend(&event, R"(},"finish_reason":)",
                  finish_reason == nullptr ? "null" : absl::StrCat("\"", finish_reason, "\""),
                  "}]}\n\n");
  return event;
}

std::string ChatEncoder::Events(const v1::GenerateResponse& response) {
  std::string events;
  for (const v1::OutputChunk& chunk : response.outputs()) {
    const v1::Payload& payload = chunk.payload();
    if (payload.has_text() && text_ && chunk.stage_id() == text_stage_) {
      completion_tokens_ += WordCount(payload.text().text());
      events +=
          ChunkEvent(absl::StrCat(R"("content":)", json(payload.text().text()).dump()), nullptr);
    } else if (payload.has_audio() && audio_) {
      std::string bytes;
      if (audio_format_ == AudioFormat::kWav && !wav_header_sent_) {
        bytes = WavHeader(payload.audio().sample_rate_hz(), payload.audio().channels(), -1);
        wav_header_sent_ = true;
      }
      bytes += payload.audio().pcm_s16le();
      events += ChunkEvent(absl::StrCat(R"("audio":{"id":)", json("audio_" + id_).dump(),
                                        R"(,"data":")", absl::Base64Escape(bytes), R"("})"),
                           nullptr);
    }
  }
  return events;
}

std::string ChatEncoder::UsageJson() const {
  return json({{"prompt_tokens", prompt_tokens_},
               {"completion_tokens", completion_tokens_},
               {"total_tokens", prompt_tokens_ + completion_tokens_}})
      .dump();
}

std::string ChatEncoder::FinalEvents(const v1::Terminal& terminal) {
  std::string events;
  if (FinishedWell(terminal)) {
    events += ChunkEvent("", FinishReason(terminal.finish_reason()));
  } else {
    events += Event(json::parse(TerminalError(terminal).Json()));
  }
  if (include_usage_) {
    events += Event({{"id", id_},
                     {"object", "chat.completion.chunk"},
                     {"created", created_},
                     {"model", model_},
                     {"choices", json::array()},
                     {"usage", json::parse(UsageJson())}});
  }
  return events + "data: [DONE]\n\n";
}

void ChatEncoder::Gather(const v1::GenerateResponse& response) {
  for (const v1::OutputChunk& chunk : response.outputs()) {
    const v1::Payload& payload = chunk.payload();
    if (payload.has_text() && text_ && chunk.stage_id() == text_stage_) {
      completion_tokens_ += WordCount(payload.text().text());
      text_so_far_ += payload.text().text();
    } else if (payload.has_audio() && audio_) {
      if (sample_rate_hz_ == 0) {
        sample_rate_hz_ = payload.audio().sample_rate_hz();
        channels_ = payload.audio().channels() == 0 ? 1 : payload.audio().channels();
      }
      pcm_ += payload.audio().pcm_s16le();
    }
  }
}

std::variant<std::string, ApiError> ChatEncoder::Completion(const v1::Terminal& terminal) const {
  if (!FinishedWell(terminal)) return TerminalError(terminal);
  json message = {{"role", "assistant"}};
  message["content"] = text_ ? json(text_so_far_) : json(nullptr);
  if (audio_) {
    const std::string bytes =
        audio_format_ == AudioFormat::kWav
            ? WavHeader(sample_rate_hz_, channels_, static_cast<int64_t>(pcm_.size())) + pcm_
            : pcm_;
    message["audio"] = {{"id", "audio_" + id_},
                        {"data", absl::Base64Escape(bytes)},
                        {"expires_at", created_ + 3600},
                        {"transcript", text_so_far_}};
  }
  json choice = {{"index", 0},
                 {"message", std::move(message)},
                 {"finish_reason", FinishReason(terminal.finish_reason())}};
  return json({{"id", id_},
               {"object", "chat.completion"},
               {"created", created_},
               {"model", model_},
               {"choices", json::array({std::move(choice)})},
               {"usage", json::parse(UsageJson())}})
      .dump();
}

}  // namespace omnistage
