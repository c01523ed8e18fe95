// RealtimeSession: one session of OpenAI's Realtime API (GA protocol) over a
// WebSocket (websocket.h): the client's events in, the server's out, on the
// HTTP server's loop thread. It keeps the session's settings
// (session.update), its conversation (realtime_conversation.h) and at most
// one response at a time, whose Generate (realtime_call.h) runs the
// conversation through the pipeline — or, after an audio turn's commit, whose
// call is that turn's GenerateDuplex (realtime_audio_input.h) — and whose
// events realtime_encoder.h makes. A malformed or
// unsupported event is answered with an `error` event and the session goes
// on. The client going away cancels the running response (aborted on every
// stage) and frees the session; the gateway going away (GoAway) closes it
// with 1001 once its response ended. docs/openai.md, "Realtime API".
#ifndef OMNISTAGE_GATEWAY_REALTIME_REALTIME_SESSION_H_
#define OMNISTAGE_GATEWAY_REALTIME_REALTIME_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "common/playback_model.h"
#include "common/tracing/tracer.h"
#include "gateway/chat/chat_call.h"
#include "gateway/chat/chat_request.h"
#include "gateway/http/websocket.h"
#include "gateway/realtime/realtime_audio_input.h"
#include "gateway/realtime/realtime_call.h"
#include "gateway/realtime/realtime_conversation.h"
#include "gateway/realtime/realtime_duplex_call.h"
#include "gateway/realtime/realtime_encoder.h"
#include "gateway/realtime/realtime_events.h"
#include "gateway/realtime/realtime_item_events.h"
#include "gateway/realtime/realtime_spans.h"

namespace omnistage {

class RealtimeSession : public std::enable_shared_from_this<RealtimeSession> {
 public:
  // What a session needs of the gateway.
  struct Backend {
    v1::Orchestrator::Stub* stub = nullptr;
    CallFallback fallback;
    LoopPoster post;
    // A response began (+1) or ended (-1).
    std::function<void(int)> responses;
    // The session ended (its connection closed).
    std::function<void()> ended;
    // A response ended: how a listener playing its audio as it went out
    // heard it (docs/observability.md, "How a listener hears it").
    std::function<void(const PlaybackFigures&)> heard;
    // Where the session's spans go (not owned; null: not traced).
    const Tracer* tracer = nullptr;
  };
  // Starts a session on `upgrade` (the 101 written): sends session.created.
  // `authorization` goes with each call; `trace`: what the upgrade request
  // passes on, the parent of the session's spans (realtime_spans.h).
  // `stage0_echoes`: the orchestrator showed a stage 0 that passes text
  // through to the client (a final-output recognizer followed by another
  // final-output text stage): a text response drops stage 0's text, which is
  // its prompt echoed. Null when the connection could not be taken (`ended`
  // ran).
  static std::shared_ptr<RealtimeSession> Start(std::unique_ptr<HttpUpgrade> upgrade,
                                                const WebSocketLimits& limits,
                                                const ServedModel& model, Backend backend,
                                                std::string authorization, TraceHeaders trace,
                                                bool stage0_echoes);
  // The gateway shuts down: the session closes with 1001 ("going away") once
  // its running response ended, at once if none runs; `now` (the drain's
  // deadline passed): the running response is cancelled first, and its
  // response.done (cancelled) goes before the close. Events the client sends
  // once the close is out are not answered.
  void GoAway(bool now);

 private:
  RealtimeSession(const ServedModel& model, Backend backend, std::string authorization,
                  TraceHeaders trace, bool stage0_echoes);
  void OnMessage(const std::string& text);
  void OnClosed();
  void Send(const std::string& event);
  void SendError(RealtimeError error, const std::string& event_id);

  void SessionUpdate(const ClientEvent& event);
  void ResponseCreate(const ClientEvent& event);
  void ResponseCancel(const ClientEvent& event);
  void AudioInput(const ClientEvent& event, RealtimeAudioInput::Op op);

  // A committed audio turn becomes the response with `config`.
  void Answer(const RealtimeConfig& config, std::shared_ptr<AudioTurn> turn);
  // A turn committed by turn detection is answered, when no response runs.
  void AnswerDetectedTurn();
  // The user's speech started: the running response is cancelled
  // (interrupt_response), its audio truncated to what was played.
  void Interrupt();
  // A response begins: response.created and its item's first events.
  void Begin(const RealtimeConfig& config, const std::string& prompt);
  // The running response's call answered / ended.
  void Deliver(v1::GenerateResponse response);
  void Done(const grpc::Status& status);
  // An audio turn's call answered / ended (the response's, once taken).
  void TurnResponse(const std::shared_ptr<AudioTurn>& turn, v1::GenerateResponse response);
  void TurnDone(const std::shared_ptr<AudioTurn>& turn, const grpc::Status& status);
  void CloseGoingAway();

  const ServedModel model_;
  const Backend backend_;
  const std::string authorization_;
  const bool stage0_echoes_;
  std::unique_ptr<WebSocket> ws_;
  // Holds the session while its connection is open.
  std::shared_ptr<RealtimeSession> self_;
  EventIds ids_;
  RealtimeConfig config_;
  const std::string conversation_id_;
  // Made once the session has its id.
  std::optional<RealtimeSpans> spans_;
  RealtimeConversation conversation_;
  RealtimeItemEvents items_;
  RealtimeAudioInput audio_input_;
  // The running response (none: null), its call, and the audio turn it
  // answers (none: a Generate of the conversation).
  std::unique_ptr<RealtimeEncoder> response_;
  std::shared_ptr<RealtimeCallControl> call_;
  std::shared_ptr<AudioTurn> turn_;
  v1::Terminal terminal_;
  bool got_terminal_ = false;
  bool cancelled_ = false;
  // Cancelled by the user's speech, and the audio they heard (ms).
  bool interrupted_ = false;
  int64_t heard_ms_ = 0;
  // When the running response began, and its audio as the client got it.
  absl::Time began_;
  PlaybackModel player_;
  bool going_away_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_REALTIME_SESSION_H_
