// RealtimeAudioInput: a Realtime session's input audio buffer
// (input_audio_buffer.append, .commit, .clear) — the one place that decides
// what becomes of the client's audio.
//
// Audio is input for stage 0 of the pipeline, and only a pipeline whose stage
// 0 is a speech recognizer (engine "listener") takes it. The gateway learns
// stage 0's engine from the orchestrator's GetPipelineStatus, asked with the
// client's token before the session began (an admin's token sees it; a
// user's is refused that call, and then the gateway cannot tell). Stage 0 of
// another engine, or unknown: each audio event is answered with the error
// `input_audio_not_supported` (send text with conversation.item.create).
//
// A listener stage 0 is to get the audio through the orchestrator's
// GenerateDuplex (the request first, then InputChunk payloads of audio as
// they are appended, `last` at the commit; the outputs stream back as
// response.create's). The orchestrator serves it now; this class does not
// drive it yet (no listener engine exists to test it against): such a
// pipeline's audio events are answered `input_audio_unavailable`
// (docs/openai.md). Pure: no I/O.
#ifndef OMNISTAGE_GATEWAY_REALTIME_AUDIO_INPUT_H_
#define OMNISTAGE_GATEWAY_REALTIME_AUDIO_INPUT_H_

#include <optional>
#include <string>

#include "gateway/realtime_events.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

class RealtimeAudioInput {
 public:
  enum class Op { kAppend, kCommit, kClear };
  // `stage0`: stage 0 as GetPipelineStatus showed it (nullptr: unknown, and
  // `unknown_why` says why).
  RealtimeAudioInput(const v1::StageStatus* stage0, const std::string& unknown_why);
  // An append (with its decoded PCM), a commit or a clear: the error to
  // answer it with, or nullopt when it was taken.
  std::optional<RealtimeError> Handle(Op op, const std::string& pcm,
                                      const std::string& event_id) const;

 private:
  RealtimeError refusal_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_AUDIO_INPUT_H_
