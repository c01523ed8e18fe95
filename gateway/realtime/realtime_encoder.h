// RealtimeEncoder: one Realtime response's server events, from what the
// pipeline streams (GenerateResponse outputs, then how it ended). A response
// has one output item, an assistant message, with one content part:
//   text:  response.output_text.delta ... response.output_text.done
//   audio: response.output_audio.delta (base64 of 24 kHz 16-bit PCM) and
//          response.output_audio_transcript.delta (the text it speaks) ...
//          response.output_audio.done, response.output_audio_transcript.done
// framed by response.created, response.output_item.added,
// conversation.item.added, response.content_part.added and their .done
// events, and response.done with the status (completed; incomplete at
// max_output_tokens; cancelled; failed, with the error) and the usage (words,
// as the chat completions count them). Pure: no I/O. One per response.
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_ENCODER_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_ENCODER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "gateway/realtime/realtime_events.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class RealtimeEncoder {
 public:
  // kInterrupted: cancelled by the user's speech (turn detection's barge-in).
  enum class Status { kCompleted, kIncomplete, kCancelled, kInterrupted, kFailed };
  // "completed", "incomplete", "cancelled", "interrupted" (response.done
  // says cancelled, for turn_detected), "failed".
  static absl::string_view StatusName(Status status);

  // `config`: the response's settings; `prompt`: what it answers (its words
  // are the input tokens).
  RealtimeEncoder(EventIds& ids, RealtimeConfig config, std::string conversation_id,
                  const std::string& prompt);
  const std::string& response_id() const { return response_id_; }
  const std::string& item_id() const { return item_.id; }

  // response.created.
  std::string Created();
  // The output item and its content part begin; `previous_item_id`: the
  // conversation's item before it ("" for none).
  std::vector<std::string> Begin(const std::string& previous_item_id);
  // The deltas `response` carries (text or audio the response asked for).
  std::vector<std::string> Events(const v1::GenerateResponse& response);
  // Set when the pipeline's audio is not what the protocol carries (24 kHz
  // mono): the response must fail with it.
  const std::optional<RealtimeError>& failure() const { return failure_; }
  // The .done events and response.done. `error`: a failed response's.
  std::vector<std::string> Finish(Status status, const RealtimeError* error = nullptr);
  // The assistant's item as it stands (for the conversation).
  const RealtimeItem& item() const { return item_; }
  // The audio sent so far, in ms.
  int64_t audio_ms() const { return item_.audio_ms; }
  // response.done alone: a response that failed before it began.
  std::string FailedBeforeBegin(const RealtimeError& error);

 private:
  nlohmann::json Response(const char* status, nlohmann::json details) const;
  nlohmann::json Where() const;

  EventIds& ids_;
  const RealtimeConfig config_;
  const std::string conversation_id_;
  const std::string response_id_;
  const int64_t input_tokens_;
  RealtimeItem item_;
  bool begun_ = false;
  int64_t audio_bytes_ = 0;
  std::optional<RealtimeError> failure_;
  std::string usage_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_ENCODER_H_
