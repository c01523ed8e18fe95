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
//                               (gateway_realtime.cc, realtime_session.h)
//   GET  /console               the live console's page, and its files under
//                               /console/ (gateway_console.cc, console/)
//   GET  /console/status        the orchestrator's GetPipelineStatus as JSON,
//                               with the completions this gateway served
// Anything else: 404, as OpenAI answers it. The client's bearer token (and W3C
// traceparent) go to the orchestrator with each call, whose authentication
// decides.
#ifndef OMNISTAGE_GATEWAY_GATEWAY_H_
#define OMNISTAGE_GATEWAY_GATEWAY_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/grpc/tls.h"
#include "common/metrics.h"
#include "gateway/chat/chat_call.h"
#include "gateway/chat/chat_request.h"
#include "gateway/console/served_requests.h"
#include "gateway/http/http_server.h"
#include "gateway/http/websocket.h"
#include "grpcpp/grpcpp.h"
#include "protos/health.grpc.pb.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

class RealtimeSession;

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
};

class Gateway {
 public:
  // `post` runs tasks on the HTTP server's loop (HttpServer::Post).
  Gateway(GatewayOptions options, LoopPoster post);

  // The HttpServer's handler (loop thread).
  void Handle(std::shared_ptr<HttpExchange> exchange);
  // Shutting down: /health answers 503 (readiness: no new clients are sent
  // here), new chat completions and Realtime sessions are refused with 503;
  // those running go on, and each Realtime session is closed with 1001 once
  // its running response ended (RealtimeSession::GoAway). Thread-safe.
  void Drain();
  // The drain's deadline passed: each Realtime session's running response is
  // cancelled, then its session closed with 1001. Thread-safe.
  void GoAway();
  // Chat completions running, Realtime responses running, Realtime sessions
  // open (or being upgraded). Thread-safe.
  int chat_completions() const { return chat_count_.load(); }
  int realtime_responses() const { return realtime_responses_count_.load(); }
  int realtime_sessions() const { return realtime_sessions_count_.load(); }
  MetricsRegistry& metrics() { return registry_; }
  // The HttpServer's events (HttpServer::OnEvent): open connections, and what
  // the HTTP limits refused or cut, by reason. Loop thread.
  void CountHttp(HttpEvent event);

 private:
  void ChatCompletions(std::shared_ptr<HttpExchange> exchange);
  // /v1/realtime (gateway_realtime.cc): checks the upgrade, the model and the
  // token (the orchestrator's answer to GetPipelineStatus), then hands the
  // connection to a RealtimeSession.
  void Realtime(std::shared_ptr<HttpExchange> exchange);
  void StartRealtime(std::shared_ptr<HttpExchange> exchange, const std::string& head,
                     std::string authorization, const grpc::Status& status,
                     const v1::PipelineStatus& pipeline);
  // Asks `stub` for the pipeline's status with the client's `authorization`
  // (passed on: the orchestrator decides whether that token may see it), for
  // up to `timeout`; `done` runs on the loop thread with the call's status and
  // the answer.
  using StatusAnswer = std::function<void(const grpc::Status&, const v1::PipelineStatus&)>;
  void AskPipelineStatus(v1::Orchestrator::Stub* stub, const std::string& authorization,
                         std::chrono::seconds timeout, StatusAnswer done);
  // /console and its files, /console/status (gateway_console.cc).
  void Console(std::shared_ptr<HttpExchange> exchange);
  // Asks an orchestrator (any: the console is for a pipeline that is not
  // ready too) for its status with the client's token, whose role the
  // orchestrator checks (GetPipelineStatus is an admin's call).
  void ConsoleStatus(std::shared_ptr<HttpExchange> exchange);
  // A chat completion that started at `started` ended as `outcome`.
  void Served(const CallOutcome& outcome, absl::Time started);
  // Tells every open Realtime session to go away (loop thread).
  void GoAwaySessions(bool now);
  // Answers a refusal of the route `route` in OpenAI's shape.
  void Refuse(HttpExchange& exchange, const std::string& route, const ApiError& error);
  void Health(std::shared_ptr<HttpExchange> exchange);
  // Asks an orchestrator's readiness through the channel (so one it picks;
  // `any`: the channel that does not look at readiness), and asks again, up to
  // `attempts_left` calls, while one answers NOT_SERVING.
  void CheckReadiness(std::shared_ptr<HttpExchange> exchange, int attempts_left, bool any);
  static constexpr int kReadinessAttempts = 3;
  void Respond(HttpExchange& exchange, int status, const std::string& content_type,
               const std::string& body);
  void Count(const std::string& route, int status);

  const GatewayOptions options_;
  const LoopPoster post_;
  // Round robin over the ready orchestrators; the fallback (ChatCall's, and
  // /health's for a reason): over all of them.
  std::shared_ptr<grpc::Channel> channel_;
  std::shared_ptr<grpc::Channel> any_channel_;
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
  std::unique_ptr<v1::Orchestrator::Stub> any_stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
  std::unique_ptr<grpc::health::v1::Health::Stub> any_health_;
  MetricsRegistry registry_;
  Family<Counter>& requests_;
  Gauge& in_flight_;
  Counter& fallbacks_;
  Gauge& http_connections_;
  Family<Counter>& http_refusals_;
  Gauge& realtime_sessions_;
  // Loop thread: sessions open, and upgrades on their way (their token is
  // being checked); the sessions open, by a number of their own.
  int realtime_count_ = 0;
  std::map<uint64_t, std::weak_ptr<RealtimeSession>> sessions_;
  uint64_t next_session_ = 0;
  // Loop thread: the chat completions served, for the console.
  static constexpr size_t kServedKept = 50;
  ServedRequests served_{kServedKept};
  std::atomic<bool> draining_{false};
  std::atomic<int> chat_count_{0};
  std::atomic<int> realtime_responses_count_{0};
  std::atomic<int> realtime_sessions_count_{0};
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_GATEWAY_H_
