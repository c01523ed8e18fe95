// Gateway: the OpenAI-compatible HTTP API in front of the orchestrators one
// gRPC target names (one, or several: calls go round robin to the ready ones,
// and when none is ready, once more to any of them).
//
//   POST /v1/chat/completions   streamed (SSE) or whole (chat_request.h,
//                               chat_response.h, chat_call.h)
//   GET  /v1/models             the one model it serves
//   GET  /health                200 while an orchestrator is ready, else 503
//   GET  /metrics               Prometheus text
//   GET  /v1/realtime           the Realtime API over WebSocket
//                               (realtime_route.h, realtime_session.h)
//   GET  /console               the live console's page, and its files under
//                               /console/ (console_route.h, console/)
//   GET  /console/status        the orchestrator's GetPipelineStatus as JSON,
//                               with the completions this gateway served
//   GET  /favicon.ico           204: no icon (browsers ask on every page)
//   /v1/files...                the Files API, on the durable store the
//                               gateway is given (files_route.h)
//   /v1/batches...              the Batch API (batches_route.h), its lines
//                               run by batch_runner.h
// Chat completions with audio in and Realtime sessions go to the orchestrators
// of a pipeline that hears, when one is given (--hearing_orchestrator).
// Anything else: 404, as OpenAI answers it. The client's bearer token (and W3C
// traceparent and tracestate) go to the orchestrator with each call, whose
// authentication decides. Calls reach the orchestrators through Orchestrators
// (orchestrators.h); every answer is counted by RouteReplies.
#ifndef OMNISTAGE_GATEWAY_GATEWAY_H_
#define OMNISTAGE_GATEWAY_GATEWAY_H_

#include <atomic>
#include <memory>
#include <string>

#include "common/grpc/tls.h"
#include "common/metrics.h"
#include "common/tracing/tracer.h"
#include "gateway/batch/sqlite_database.h"
#include "gateway/batch/store_thread.h"
#include "gateway/batch_runner.h"
#include "gateway/batches_route.h"
#include "gateway/chat/chat_request.h"
#include "gateway/console_route.h"
#include "gateway/files_route.h"
#include "gateway/http/http_server.h"
#include "gateway/http/websocket.h"
#include "gateway/orchestrators.h"
#include "gateway/realtime_route.h"
#include "gateway/route_replies.h"
#include "gateway/speech_route.h"
#include "gateway/store_access.h"
#include "gateway/transcription_route.h"

namespace omnistage {

struct GatewayOptions {
  ServedModel model;
  // The orchestrators' gRPC target (host:port, a DNS name listing several, or
  // ipv4:A,B), and TLS to them (plaintext when empty; a client certificate
  // when cert/key are set).
  std::string orchestrator = "127.0.0.1:50051";
  TlsFiles orchestrator_tls;
  // The name the orchestrators' certificates must carry, when it is not the
  // host dialled.
  std::string orchestrator_tls_name;
  // Realtime sessions (WebSockets on /v1/realtime) open at once; one more is
  // refused with 503 before the upgrade. 0: no limit.
  int max_realtime_sessions = 1000;
  WebSocketLimits realtime;
  // The orchestrators of a pipeline that hears (stage 0 a speech recogniser
  // that passes typed text through), dialled with the TLS above, and its
  // stages (the same model id): chat completions with audio in and every
  // Realtime session go there. Empty: to `orchestrator`.
  std::string hearing_orchestrator;
  ServedModel hearing_model;
  // The orchestrators of the speech pipeline (/v1/audio/speech), dialled with
  // the TLS above; empty: no speech.
  std::string speech_orchestrator;
  SpeechModels speech_models;
  // The orchestrators of the listening pipeline (/v1/audio/transcriptions),
  // dialled with the TLS above (an empty address: no transcriptions), and
  // what that route takes.
  TranscriptionRoute::Options transcription;
  // The largest file POST /v1/files takes (docs/openai.md, "Files").
  size_t max_file_bytes = 200 << 20;
  // The Batch API (docs/openai.md, "Batches"): the most lines a batch has,
  // the lines running at once, and the gateway's own Authorization for them
  // ("Bearer <token>" of a token with the gateway role; "" without tokens).
  int64_t max_batch_lines = 50000;
  int batch_concurrency = 16;
  std::string batch_authorization;
  // Where the requests' spans go (docs/observability.md, "Traces"; not
  // owned); null: nowhere. Its export counts are on /metrics.
  const Tracer* tracer = nullptr;
};

class Gateway {
 public:
  // `post` runs tasks on the HTTP server's loop (HttpServer::Post). `store`:
  // the Files and Batch APIs' database (batch_schema.h); null, none (their
  // routes answer 404).
  Gateway(GatewayOptions options, LoopPoster post, std::unique_ptr<SqliteDatabase> store);
  ~Gateway();

  // The HttpServer's handler (loop thread).
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // Shutting down: /health answers 503 (readiness: no new clients are sent
  // here), new chat completions and Realtime sessions are refused with 503;
  // those running go on, and each Realtime session is closed with 1001 once
  // its running response ended (RealtimeSession::GoAway); no more batch
  // lines start. Thread-safe.
  void Drain();
  // The drain's deadline passed: each Realtime session's running response is
  // cancelled, then its session closed with 1001; batch lines still running
  // are given up (they run again at the next start). Thread-safe.
  void GoAway();
  // Chat completions running, speech and transcription requests running,
  // Realtime responses running, Realtime sessions open (or being upgraded).
  // Thread-safe.
  int chat_completions() const { return chat_count_.load(); }
  int speech_requests() const { return speech_.running(); }
  int transcriptions() const { return transcription_.running(); }
  int realtime_responses() const { return realtime_.responses(); }
  int realtime_sessions() const { return realtime_.sessions(); }
  // Batch API lines running. Thread-safe.
  int batch_lines() const { return batch_runner_ != nullptr ? batch_runner_->in_flight() : 0; }
  MetricsRegistry& metrics() { return registry_; }
  // The HttpServer's events (HttpServer::OnEvent): open connections, and what
  // the HTTP limits refused or cut, by reason. Loop thread.
  void CountHttp(HttpEvent event);

 private:
  void ChatCompletions(std::shared_ptr<HttpExchange> exchange);
  void Health(std::shared_ptr<HttpExchange> exchange);
  // Asks an orchestrator's readiness through the channel (so one it picks;
  // `any`: the channel that does not look at readiness), and asks again, up to
  // `attempts_left` calls, while one answers NOT_SERVING.
  void CheckReadiness(std::shared_ptr<HttpExchange> exchange, int attempts_left, bool any);
  static constexpr int kReadinessAttempts = 3;

  const GatewayOptions options_;
  const LoopPoster post_;
  MetricsRegistry registry_;
  Gauge& in_flight_;
  Gauge& http_connections_;
  Family<Counter>& http_refusals_;
  // By target: orchestrator (--orchestrator), speech_orchestrator,
  // transcription_orchestrator.
  Family<Counter>& fallbacks_;
  RouteReplies replies_;
  Orchestrators orchestrators_;
  // --hearing_orchestrator's (null: none; orchestrators_ hears).
  std::unique_ptr<Orchestrators> hearing_;
  // The Files and Batch APIs' store; null without one. Stopped first
  // (~Gateway): it runs what was posted to it while the routes its tasks
  // answer through still exist.
  std::unique_ptr<StoreThread> store_;
  std::atomic<bool> draining_{false};
  std::atomic<int> chat_count_{0};
  RealtimeRoute realtime_;
  ConsoleRoute console_;
  SpeechRoute speech_;
  TranscriptionRoute transcription_;
  std::unique_ptr<StoreAccess> store_access_;
  FilesRoute files_;
  std::unique_ptr<BatchRunner> batch_runner_;
  BatchesRoute batches_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_GATEWAY_H_
