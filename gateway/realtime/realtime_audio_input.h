// RealtimeAudioInput: a Realtime session's input audio buffer
// (input_audio_buffer.append, .commit, .clear) — the client's speech as one
// audio turn through the orchestrator's GenerateDuplex (realtime_duplex_call.h):
//
//   first append   opens the call: the request (the session's settings and the
//                  conversation so far, realtime_conversation.h), then this
//                  append's PCM as an InputChunk of Payload.audio {pcm_s16le,
//                  24000 Hz, 1 channel}
//   each append    another such chunk, sent at once (stage 0 hears the audio
//                  while it streams in)
//   commit         an empty chunk with `last`; input_audio_buffer.committed,
//                  and the user's item (content input_audio) joins the
//                  conversation: conversation.item.added and .done
//   clear          cancels an open call (aborted on every stage);
//                  input_audio_buffer.cleared
//
// What the call streams back is split by stage: text of stage 0 (the stage
// that took the audio: a speech recognizer) is what was heard, the user's
// transcript — conversation.item.input_audio_transcription.delta as it comes
// (after the commit; what came before goes out then) and .completed at the
// turn's end — with the echo of the prompt it passed through skipped; the
// rest (a later stage's text, audio) is the assistant's answer, which waits
// for response.create (realtime_session.h reads no further until then).
//
// With turn detection (server_vad, the default; realtime_turn_detector.h) the
// server hears where the user's turns are: audio outside a turn opens no call
// (a turn's prefix is held); a turn's start opens its call with the audio
// from audio_start_ms (input_audio_buffer.speech_started {audio_start_ms,
// item_id}), its audio streams on as it comes, and its stop is
// input_audio_buffer.speech_stopped {audio_end_ms, item_id} and the commit
// above, with a response wanted when create_response is set (the session
// takes it, TakeAutoResponse()). A commit by the client commits the turn going
// on, or the held audio when no speech was heard; a clear drops both. Speech
// that starts while a committed turn waits for its response (create_response
// false, or a running response not interrupted) is answered with
// input_audio_turn_pending and not heard. Settings change from the next turn.
//
// Whether the pipeline takes audio is learned from the call, so a user's
// token works as an admin's: FAILED_PRECONDITION (stage 0 takes no streamed
// input) or a terminal INVALID_ARGUMENT from stage 0's engine refusing audio
// is the error `input_audio_not_supported`, and each later audio event is
// answered so at once. The orchestrator's input limits come back as terminal
// errors: input_audio_buffer_too_large, input_audio_chunk_too_large,
// input_audio_idle_timeout. docs/openai.md, "Input audio".
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_AUDIO_INPUT_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_AUDIO_INPUT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "gateway/realtime/realtime_conversation.h"
#include "gateway/realtime/realtime_duplex_call.h"
#include "gateway/realtime/realtime_events.h"
#include "gateway/realtime/realtime_turn_detector.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// One audio turn: its call, the user's item and what was heard.
struct AudioTurn {
  std::shared_ptr<RealtimeDuplexControl> call;
  bool committed = false;
  // The user's item (from the commit) and its transcript so far.
  std::string item_id;
  std::string transcript;
  // Stage 0 sent text (it is a final-output recognizer).
  bool heard_text = false;
  // PCM bytes appended.
  int64_t audio_bytes = 0;
  // Bytes of stage 0's text still to skip: the prompt it passes through.
  size_t echo_left = 0;
  // What answers, before response.create.
  std::optional<v1::GenerateResponse> held;
  // The turn failed and the client was told.
  bool failed = false;
  // The first append's event_id: the error a failure of the turn is told
  // with answers it.
  std::string event_id;
  // Opened by turn detection (its item_id made at the start).
  bool detected = false;
  // Committed by turn detection with create_response: the session answers it.
  bool respond = false;
};

class RealtimeAudioInput {
 public:
  enum class Op { kAppend, kCommit, kClear };
  struct Host {
    EventIds* ids = nullptr;
    RealtimeConversation* conversation = nullptr;
    // Sends a server event to the client.
    std::function<void(const std::string&)> send;
    // The request an audio turn opens with (the session's settings now), or
    // why there is none.
    std::function<std::variant<ChatRequest, RealtimeError>()> request;
    // Opens `turn`'s GenerateDuplex; its responses and end go to the session,
    // which hands them to Heard() and Ended().
    std::function<std::shared_ptr<RealtimeDuplexControl>(v1::GenerateRequest,
                                                         std::shared_ptr<AudioTurn>)>
        open;
  };
  explicit RealtimeAudioInput(Host host);

  // The session's turn_detection (nullopt: manual turns). An error when the
  // detector cannot be made (the settings stay as they were).
  std::optional<RealtimeError> Configure(const std::optional<TurnDetection>& turns);

  // An append (with its decoded PCM), a commit or a clear. Errors are sent.
  void Handle(Op op, const std::string& pcm, const std::string& event_id);

  // response.create takes the committed turn over (null: none); the input is
  // free for the next turn.
  std::shared_ptr<AudioTurn> TakeCommitted();
  // The committed turn when turn detection wants it answered (null: none),
  // taken over as by TakeCommitted().
  std::shared_ptr<AudioTurn> TakeAutoResponse();
  // Whether turn detection heard speech start since the last call (the
  // session's cue to interrupt its response).
  bool TakeSpeechStarted();

  // A response of `turn`'s call: stage 0's text is taken out of it (what was
  // heard, sent as transcription events once the item exists). Before
  // response.create (`responding` false) a response with anything else is
  // held in the turn, and a failure is answered with an `error`, the call
  // cancelled. True: the session must not read on.
  bool Heard(AudioTurn& turn, v1::GenerateResponse* response, bool responding);
  // `turn`'s call ended: for a response (`responding`) the transcript is
  // completed; before response.create, an `error` says why, if none did.
  void Ended(AudioTurn& turn, const grpc::Status& status, bool responding);
  // The client went away: an open turn is cancelled.
  void Close();

  // How a turn's failure reads to the client.
  static RealtimeError TurnError(const absl::Status& status);
  // Takes stage 0's text out of `response` and returns it. For a response
  // that is not an audio turn's, on a pipeline whose stage 0 passes the
  // prompt through to the client (a recognizer that is final_output), that
  // is the prompt echoed.
  static std::string TakeStage0Text(v1::GenerateResponse* response);

 private:
  void Append(const std::string& pcm, const std::string& event_id);
  // The audio through turn detection.
  void Detect(const std::string& pcm, const std::string& event_id);
  void SpeechStarted(int64_t audio_start_ms, const std::string& event_id);
  void SpeechStopped(int64_t audio_end_ms, const std::string& event_id);
  // A committed turn waits for its response: the client is told `message`.
  bool Pending(const char* message, const std::string& event_id);
  // Opens a turn's call; false (the client told) when it cannot be.
  bool Open(const std::string& event_id);
  void SendAudio(const std::string& pcm);
  // False (the client told) when the turn could not be committed.
  bool Commit(const std::string& event_id);
  void Clear(const std::string& event_id);
  void SendError(RealtimeError error, const std::string& event_id);
  // A failure of `turn` before its response: told, remembered, the call
  // cancelled.
  void Fail(AudioTurn& turn, const absl::Status& status);
  void SendTranscriptDelta(const AudioTurn& turn, const std::string& delta);

  Host host_;
  // Set once the pipeline refused audio: every audio event gets it.
  std::optional<RealtimeError> unsupported_;
  // The open or committed turn not yet a response's (none: null).
  std::shared_ptr<AudioTurn> turn_;
  RealtimeTurnDetector detector_;
  std::optional<TurnDetection> turns_;
  // Speech heard while a committed turn waits: dropped until it stops.
  bool ignoring_ = false;
  bool speech_started_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_AUDIO_INPUT_H_
