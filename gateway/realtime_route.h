// RealtimeRoute: the gateway's /v1/realtime, the Realtime API's WebSocket
// upgrade (docs/openai.md, "Realtime API"), and the sessions it opened.
//
// Before the 101, the client's token is put to an orchestrator in a
// GetPipelineStatus call, as a chat completion's would be in its Generate:
// UNAUTHENTICATED is a 401 in OpenAI's shape (the SDK's WebSocket fails to
// open), an admin's token also learns the stages (whether stage 0 echoes text
// responses' prompts: realtime_session.h), a user's is refused that call
// (PERMISSION_DENIED) and is let in. Whether the pipeline takes audio is
// learned from the audio's own call (realtime_audio_input.h), for either
// token. At most max_sessions are open (or being upgraded) at once.
//
// Loop thread only, except the counts.
#ifndef OMNISTAGE_GATEWAY_REALTIME_ROUTE_H_
#define OMNISTAGE_GATEWAY_REALTIME_ROUTE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "common/metrics.h"
#include "common/tracing/tracer.h"
#include "gateway/chat/chat_request.h"
#include "gateway/http/http_server.h"
#include "gateway/http/trace_headers.h"
#include "gateway/http/websocket.h"
#include "gateway/orchestrators.h"
#include "gateway/route_replies.h"

namespace omnistage {

class RealtimeSession;

class RealtimeRoute {
 public:
  struct Options {
    ServedModel model;
    // 0: no limit.
    int max_sessions = 1000;
    WebSocketLimits limits;
    // Where the sessions' spans go (not owned; null: not traced).
    const Tracer* tracer = nullptr;
  };

  // None of the pointers is owned; all outlive the route. `draining` is the
  // gateway's: once set, upgrades are refused with 503.
  RealtimeRoute(Options options, Orchestrators* orchestrators, RouteReplies* replies,
                LoopPoster post, const std::atomic<bool>* draining, MetricsRegistry* registry);

  // An HTTP request to /v1/realtime.
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // Tells every open session to go away: once its running response ended, or
  // (`now`) after cancelling it.
  void GoAway(bool now);

  // Responses running, sessions open (or being upgraded). Thread-safe.
  int responses() const { return responses_count_.load(); }
  int sessions() const { return sessions_count_.load(); }

 private:
  void Start(std::shared_ptr<HttpExchange> exchange, const std::string& head,
             std::string authorization, TraceHeaders trace, const grpc::Status& status,
             const v1::PipelineStatus& pipeline);

  const Options options_;
  Orchestrators* const orchestrators_;
  RouteReplies* const replies_;
  const LoopPoster post_;
  const std::atomic<bool>* const draining_;
  Gauge& open_gauge_;
  // Sessions open, and upgrades on their way (their token is being checked).
  int open_ = 0;
  // The sessions open, by a number of their own.
  std::map<uint64_t, std::weak_ptr<RealtimeSession>> sessions_;
  uint64_t next_session_ = 0;
  std::atomic<int> responses_count_{0};
  std::atomic<int> sessions_count_{0};
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_REALTIME_ROUTE_H_
