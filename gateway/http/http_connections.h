// HttpConnections: what HTTP clients may hold on an HttpServer
// (docs/security.md, "The gateway's HTTP limits"):
// - connections: at most HttpLimits::max_connections open, and at most
//   max_connections_per_address from one client address; one more is refused
//   at once (a 503 on plain HTTP, then closed);
// - time: a whole request (request line, headers, body) must arrive within
//   request_read_timeout of the connection's start or of its previous
//   response's end, or the connection is closed. libevent's own timeout
//   restarts with every read, so a client sending a byte every few seconds
//   would otherwise hold its connection for ever;
// - header lines: more than max_headers is a 431 (their bytes are bounded by
//   libevent, evhttp_set_max_headers_size: a 400).
// Each refusal, each cut and each connection opened or closed is told to an
// observer (the gateway's metrics), with the answers libevent gives by itself
// before a request reaches the handler (400, 413, 501). Those answers' HTML
// pages are replaced by OpenAI-shaped JSON errors before they are sent
// (docs/openai.md, "Errors").
//
// It hears of a connection from evhttp's bufferevent hook (HttpServer makes
// every connection's bufferevent) and takes it in once evhttp has set it up:
// on the next turn of the loop, or at its first request if that comes first.
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_HTTP_HTTP_CONNECTIONS_H_
#define OMNISTAGE_GATEWAY_HTTP_HTTP_CONNECTIONS_H_

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/time/time.h"

struct bufferevent;
struct event;
struct event_base;
struct evbuffer;
struct evbuffer_cb_entry;
struct evbuffer_cb_info;
struct evhttp_connection;
struct evhttp_request;

namespace omnistage {

struct HttpLimits {
  // A request's body (413 past it): a 25 MiB upload and its form.
  size_t max_body_bytes = 26 << 20;
  // A request's line and headers together (400 past it).
  size_t max_header_bytes = 32 << 10;
  // A request's header lines (431 past it); 0: no limit.
  int max_headers = 100;
  // Open connections, in all and from one client address; 0: no limit.
  int max_connections = 10000;
  int max_connections_per_address = 1000;
  // A whole request, from the connection's start or the previous response's
  // end; zero: no limit.
  absl::Duration request_read_timeout = absl::Seconds(20);
};

// What HttpConnections tells its observer.
enum class HttpEvent {
  kConnectionOpened,
  kConnectionClosed,
  // Refused at once: over max_connections, over max_connections_per_address.
  kRefusedMaxConnections,
  kRefusedMaxConnectionsPerAddress,
  // Closed: no whole request within request_read_timeout.
  kRequestReadTimeout,
  // 431: more than max_headers header lines.
  kRefusedMaxHeaders,
  // Answered by libevent itself, before a request reached the handler: 400 (not
  // HTTP, or a line or headers past max_header_bytes), 413 (a body past
  // max_body_bytes), 501 (a method not served).
  kRefusedBadRequest,
  kRefusedBodyTooLarge,
  kRefusedMethod,
};
// The metric label of a refusal ("max_connections", "request_read_timeout",
// ...); "" for kConnectionOpened and kConnectionClosed.
const char* HttpRefusalName(HttpEvent event);
using HttpEventObserver = std::function<void(HttpEvent)>;

// One connection, from its acceptance to its close.
struct HttpConnection;

class HttpConnections {
 public:
  // `tls`: connections speak TLS (a refusal cannot be written in plain text).
  HttpConnections(event_base* base, const HttpLimits& limits, bool tls);
  ~HttpConnections();
  HttpConnections(const HttpConnections&) = delete;
  HttpConnections& operator=(const HttpConnections&) = delete;

  void set_observer(HttpEventObserver observer) { observer_ = std::move(observer); }
  // evhttp's bufferevent hook made `bev` for a connection it accepted.
  void Accepted(bufferevent* bev);
  // A whole request arrived: false when it was answered here (a refusal);
  // else `*connection` is the connection it came on (nullptr if unknown).
  bool Request(evhttp_request* request, HttpConnection** connection);
  // Runs `hook(arg)` when the connection closes (nullptr: nothing), in place of
  // what was set before.
  static void SetCloseHook(HttpConnection* connection, void (*hook)(void*), void* arg);
  // evhttp_free() freed every connection: forgets those not yet taken in.
  void Clear();
  int open() const { return open_; }

 private:
  enum class Admission { kAdmitted, kRefused, kGone };
  // Takes `connection` in, or refuses it (then `*refusal` says why).
  Admission Admit(HttpConnection* connection, HttpEvent* refusal);
  // Starts the wait for a whole request.
  void AwaitRequest(HttpConnection* connection);
  // Forgets `connection` (not taken in, or closed).
  void Drop(HttpConnection* connection);
  void Tell(HttpEvent event);

  static void OnTimer(int, short, void* connection);
  static void OnClosed(evhttp_connection*, void* connection);
  static void OnComplete(evhttp_request*, void* connection);
  static void OnOutput(evbuffer* output, const evbuffer_cb_info* info, void* connection);
  // Replaces libevent's own answer in `output` with JSON once it is whole.
  static void Rewrite(HttpConnection* connection, evbuffer* output);

  event_base* const base_;
  const HttpLimits limits_;
  const bool tls_;
  HttpEventObserver observer_;
  std::unordered_map<bufferevent*, std::unique_ptr<HttpConnection>> connections_;
  std::unordered_map<std::string, int> per_address_;
  int open_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_HTTP_CONNECTIONS_H_
