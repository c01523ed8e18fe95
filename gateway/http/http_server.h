// HttpServer: HTTP/1.1 on libevent's evhttp — one event-loop thread for every
// connection, no thread per client, responses whole or streamed in chunks
// (server-sent events) — and HttpExchange, one request and its response.
//
//   auto server = HttpServer::Start("127.0.0.1:0", [](std::shared_ptr<HttpExchange> x) {
//     x->Respond(200, "application/json", "{}");
//   });
//   (*server)->Post([] { /* runs on the loop */ });
//
// Handlers and every HttpExchange method run on the loop thread; other threads
// hand work to it with Post(). With an HttpTls (http_tls.h) it serves HTTPS
// only. What a client may hold — connections, time to send a request, header
// lines and bytes — is bounded by HttpLimits (http_connections.h).
#ifndef OMNISTAGE_GATEWAY_HTTP_HTTP_SERVER_H_
#define OMNISTAGE_GATEWAY_HTTP_HTTP_SERVER_H_

#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/tracing/span.h"
#include "common/tracing/tracer.h"
#include "gateway/http/http_connections.h"
#include "gateway/http/http_reply.h"

struct bufferevent;
struct event;
struct event_base;
struct evhttp;
struct evhttp_bound_socket;
struct evhttp_request;

namespace omnistage {

class HttpTls;
class HttpUpgrade;

class HttpExchange final : public HttpReply, public std::enable_shared_from_this<HttpExchange> {
 public:
  ~HttpExchange() override;

  const std::string& method() const { return method_; }
  // The path without the query.
  const std::string& path() const { return path_; }
  const std::string& body() const { return body_; }
  // A request header's value ("" when absent).
  std::string Header(const char* name) const;
  // A parameter of the request's query, decoded ("" when absent).
  std::string QueryParam(const char* name) const;

  // HttpReply. A stream is sent with Transfer-Encoding: chunked; `flushed`
  // runs once the data was handed to the socket; OnClose's hook runs as the
  // client's socket closes, whether or not a response began.
  void AddHeader(const std::string& name, const std::string& value) override;
  void Respond(int status, const std::string& content_type, const std::string& body) override;
  void StartStream(int status, const std::string& content_type) override;
  void Send(const std::string& data, std::function<void()> flushed = nullptr) override;
  void EndStream() override;
  void OnClose(std::function<void()> on_close) override;
  // The request's span while it runs (not started with tracing off): its
  // context is what the orchestrator is sent as the traceparent.
  const Span& span() const { return span_; }
  // Takes the connection over from HTTP for another protocol (WebSocket):
  // writes `head` (a 101's status line and headers) as it is, and hands the
  // connection on (http_upgrade.h); the exchange is done. nullptr when the
  // client went away already or a response began.
  std::unique_ptr<HttpUpgrade> Upgrade(const std::string& head);
  bool done() const override { return request_ == nullptr; }
  bool streaming() const override { return streaming_; }

 private:
  friend class HttpServer;
  struct Link;
  // `connection`: what tells the connection's close (nullptr: libevent's own
  // close callback does).
  HttpExchange(evhttp_request* request, HttpConnection* connection);
  // Hears the connection's close from here on (once owned by a shared_ptr).
  void Attach();
  // The connection closed under the exchange.
  void Closed();
  void Flushed();
  // The response ended: the request is libevent's again.
  void Release();
  void StopWatchingPeer();
  // Its server span (docs/observability.md, "Traces"), under the client's
  // traceparent; ended with the response's status, or as the client went.
  void StartSpan(const Tracer* tracer);
  void EndSpan();

  evhttp_request* request_;
  HttpConnection* connection_;
  std::string method_;
  std::string path_;
  std::string body_;
  bool streaming_ = false;
  const Tracer* tracer_ = nullptr;
  Span span_;
  int status_ = 0;
  std::function<void()> on_close_;
  std::function<void()> flushed_;
  // What the callbacks hold (the connection's close, write-done, the peer's
  // close): it finds the exchange while it lives. Set by Attach().
  Link* link_ = nullptr;
  // Watches the socket for the client's close while the exchange waits
  // (libevent reads nothing from a connection until its response is sent, so
  // it would not see the client go before then).
  event* peer_closed_ = nullptr;
};

class HttpServer {
 public:
  using Handler = std::function<void(std::shared_ptr<HttpExchange>)>;
  // Listens on `address` (host:port; port 0 picks one); nothing is served
  // until Serve(). `limits` bound what clients may hold. With `tls` (which
  // must outlive the server) every connection is TLS.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Listen(const std::string& address,
                                                            const HttpLimits& limits = HttpLimits(),
                                                            HttpTls* tls = nullptr);
  // Hears of connections opened and closed and of what the limits refused
  // (loop thread). Before Serve().
  void OnEvent(HttpEventObserver observer);
  // Each request's span goes to `tracer` (not owned, outlives the server;
  // null: none). Before Serve().
  void set_tracer(const Tracer* tracer) { tracer_ = tracer; }
  // Serves requests with `handler` from a loop thread of its own. Once.
  void Serve(Handler handler);
  // Listen() and Serve().
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           Handler handler);
  ~HttpServer();

  int port() const { return port_; }
  // Runs `task` on the loop thread (thread-safe); dropped once stopped.
  void Post(std::function<void()> task);
  // Takes no new connection (those open go on). Thread-safe.
  void StopListening();
  // Stops the loop and closes every connection. Idempotent.
  void Stop();

 private:
  HttpServer() = default;
  static void OnRequest(evhttp_request* request, void* server);
  // evhttp's hook for an accepted connection's bufferevent (a TLS one with
  // `tls_`), which HttpConnections watches.
  static bufferevent* NewBufferevent(event_base* base, void* server);
  static bufferevent* NewTlsBufferevent(event_base* base, HttpTls* tls);
  static void OnWake(int, short, void* server);
  void RunPosted();

  Handler handler_;
  HttpTls* tls_ = nullptr;
  const Tracer* tracer_ = nullptr;
  event_base* base_ = nullptr;
  std::unique_ptr<HttpConnections> connections_;
  evhttp* http_ = nullptr;
  struct evhttp_bound_socket* bound_ = nullptr;
  event* wake_ = nullptr;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> posted_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_HTTP_SERVER_H_
