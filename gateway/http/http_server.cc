#include "gateway/http/http_server.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cstdlib>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/host_port.h"
#include "common/log.h"
#include "common/tracing/trace_context.h"
#include "gateway/http/http_tls.h"

namespace omnistage {
namespace {

const char* MethodName(evhttp_cmd_type command) {
  switch (command) {
    case EVHTTP_REQ_GET: return "GET";
    case EVHTTP_REQ_POST: return "POST";
    case EVHTTP_REQ_HEAD: return "HEAD";
    case EVHTTP_REQ_PUT: return "PUT";
    case EVHTTP_REQ_DELETE: return "DELETE";
    case EVHTTP_REQ_OPTIONS: return "OPTIONS";
    default: return "OTHER";
  }
}

// An evbuffer holding `data`, freed when this goes.
struct Buffer {
  explicit Buffer(const std::string& data) : buffer(evbuffer_new()) {
    evbuffer_add(buffer, data.data(), data.size());
  }
  ~Buffer() { evbuffer_free(buffer); }
  evbuffer* buffer;
};

}  // namespace

// What libevent's callbacks get: the exchange, while it lives.
struct HttpExchange::Link {
  std::weak_ptr<HttpExchange> exchange;

  static void OnConnectionClosed(void* arg) {
    if (auto exchange = static_cast<Link*>(arg)->exchange.lock()) exchange->Closed();
  }
  static void OnEvhttpConnectionClosed(evhttp_connection*, void* arg) { OnConnectionClosed(arg); }
  static void OnWritten(evhttp_connection*, void* arg) {
    if (auto exchange = static_cast<Link*>(arg)->exchange.lock()) exchange->Flushed();
  }
  // The client closed its socket while its response was unfinished: drop the
  // connection (libevent then frees its request and calls OnConnectionClosed).
  static void OnPeerClosed(evutil_socket_t, short, void* arg) {
    auto exchange = static_cast<Link*>(arg)->exchange.lock();
    if (exchange == nullptr || exchange->request_ == nullptr) return;
    if (evhttp_connection* connection = evhttp_request_get_connection(exchange->request_)) {
      evhttp_connection_free(connection);
    }
  }
};

HttpExchange::HttpExchange(evhttp_request* request, HttpConnection* connection)
    : request_(request), connection_(connection) {
  method_ = MethodName(evhttp_request_get_command(request));
  const evhttp_uri* uri = evhttp_request_get_evhttp_uri(request);
  const char* path = uri != nullptr ? evhttp_uri_get_path(uri) : nullptr;
  path_ = path != nullptr && *path != '\0' ? path : "/";
  evbuffer* input = evhttp_request_get_input_buffer(request);
  body_.resize(evbuffer_get_length(input));
  if (!body_.empty()) evbuffer_copyout(input, body_.data(), body_.size());
}

HttpExchange::~HttpExchange() {
  // A handler that dropped its exchange unanswered: the client is not left
  // waiting, and libevent gets its request back.
  if (request_ != nullptr) Respond(500, "text/plain", "no response\n");
}

std::string HttpExchange::Header(const char* name) const {
  if (request_ == nullptr) return "";
  const char* value = evhttp_find_header(evhttp_request_get_input_headers(request_), name);
  return value == nullptr ? "" : value;
}

std::string HttpExchange::QueryParam(const char* name) const {
  const evhttp_uri* uri = request_ != nullptr ? evhttp_request_get_evhttp_uri(request_) : nullptr;
  const char* query = uri != nullptr ? evhttp_uri_get_query(uri) : nullptr;
  if (query == nullptr) return "";
  evkeyvalq params;
  params.tqh_first = nullptr;  // TAILQ_INIT: libevent does not export it.
  params.tqh_last = &params.tqh_first;
  if (evhttp_parse_query_str(query, &params) != 0) return "";
  const char* value = evhttp_find_header(&params, name);
  std::string found = value == nullptr ? "" : value;
  evhttp_clear_headers(&params);
  return found;
}

void HttpExchange::AddHeader(const std::string& name, const std::string& value) {
  if (request_ == nullptr || streaming_) return;
  evhttp_add_header(evhttp_request_get_output_headers(request_), name.c_str(), value.c_str());
}

void HttpExchange::StartSpan(const Tracer* tracer) {
  if (tracer == nullptr || !tracer->enabled()) return;
  tracer_ = tracer;
  std::optional<TraceContext> parent =
      TraceContext::Parse(Header("traceparent"), Header("tracestate"));
  // The API's paths are its routes; any other path is named by its method
  // alone (a name per stray path would not do).
  const bool api = absl::StartsWith(path_, "/v1/");
  span_ = tracer->Start(api ? absl::StrCat(method_, " ", path_) : method_, Span::Kind::kServer,
                        parent ? &*parent : nullptr, absl::Now());
  span_.Set("http.request.method", method_);
  span_.Set("url.path", path_);
  if (api) span_.Set("http.route", path_);
  if (const std::string agent = Header("User-Agent"); !agent.empty()) {
    span_.Set("user_agent.original", agent);
  }
}

void HttpExchange::EndSpan() {
  if (!span_.started()) return;
  if (status_ > 0) span_.Set("http.response.status_code", status_);
  if (status_ >= 500) span_.Error(absl::StrCat("HTTP ", status_));
  tracer_->End(span_, absl::Now());
}

void HttpExchange::Respond(int status, const std::string& content_type,
                           const std::string& body) {
  if (request_ == nullptr) return;
  status_ = status;
  EndSpan();
  evkeyvalq* headers = evhttp_request_get_output_headers(request_);
  evhttp_add_header(headers, "Content-Type", content_type.c_str());
  Buffer buffer(body);
  evhttp_request* request = request_;
  Release();
  evhttp_send_reply(request, status, nullptr, buffer.buffer);
}

void HttpExchange::StartStream(int status, const std::string& content_type) {
  if (request_ == nullptr || streaming_) return;
  streaming_ = true;
  status_ = status;
  evkeyvalq* headers = evhttp_request_get_output_headers(request_);
  evhttp_add_header(headers, "Content-Type", content_type.c_str());
  evhttp_add_header(headers, "Cache-Control", "no-cache");
  // Proxies (nginx) would otherwise hold the events back.
  evhttp_add_header(headers, "X-Accel-Buffering", "no");
  evhttp_send_reply_start(request_, status, nullptr);
}

void HttpExchange::Send(const std::string& data, std::function<void()> flushed) {
  if (request_ == nullptr || !streaming_) return;
  flushed_ = std::move(flushed);
  Buffer buffer(data);
  evhttp_send_reply_chunk_with_cb(request_, buffer.buffer, &Link::OnWritten, link_);
}

void HttpExchange::EndStream() {
  if (request_ == nullptr || !streaming_) return;
  EndSpan();
  evhttp_request* request = request_;
  Release();
  evhttp_send_reply_end(request);
}

void HttpExchange::Attach() {
  link_ = new Link{weak_from_this()};
  // Whatever the handler does with it, the exchange hears its connection's
  // close, and lets go of the request then.
  if (connection_ != nullptr) {
    HttpConnections::SetCloseHook(connection_, &Link::OnConnectionClosed, link_);
  } else if (evhttp_connection* connection = evhttp_request_get_connection(request_)) {
    evhttp_connection_set_closecb(connection, &Link::OnEvhttpConnectionClosed, link_);
  }
}

void HttpExchange::OnClose(std::function<void()> on_close) {
  if (request_ == nullptr) return;
  on_close_ = std::move(on_close);
  evhttp_connection* connection = evhttp_request_get_connection(request_);
  // EV_CLOSED: epoll's RDHUP, the peer's close, without reading its bytes.
  const evutil_socket_t fd = bufferevent_getfd(evhttp_connection_get_bufferevent(connection));
  if (peer_closed_ == nullptr && fd >= 0) {
    peer_closed_ = event_new(evhttp_connection_get_base(connection), fd, EV_CLOSED,
                             &Link::OnPeerClosed, link_);
    if (peer_closed_ != nullptr) event_add(peer_closed_, nullptr);
  }
}

void HttpExchange::StopWatchingPeer() {
  // (Also from within OnPeerClosed's own call: libevent allows it.)
  if (peer_closed_ != nullptr) event_free(peer_closed_);
  peer_closed_ = nullptr;
}

void HttpExchange::Release() {
  if (request_ == nullptr) return;
  StopWatchingPeer();
  if (connection_ != nullptr) {
    HttpConnections::SetCloseHook(connection_, nullptr, nullptr);
  } else if (evhttp_connection* connection = evhttp_request_get_connection(request_)) {
    evhttp_connection_set_closecb(connection, nullptr, nullptr);
  }
  connection_ = nullptr;
  request_ = nullptr;
  flushed_ = nullptr;
  on_close_ = nullptr;
  delete link_;
  link_ = nullptr;
}

void HttpExchange::Closed() {
  // libevent is freeing the connection. A client that went away (EOF, a
  // reset, a timeout) leaves the request with us, detached from it (no
  // connection): free it here, as the reply we will not send would have. One
  // still attached (the server stopping) is freed with the connection.
  StopWatchingPeer();
  if (span_.started()) {
    span_.Event("client_closed", absl::Now());
    EndSpan();
  }
  if (request_ != nullptr && evhttp_request_get_connection(request_) == nullptr) {
    evhttp_request_free(request_);
  }
  connection_ = nullptr;
  request_ = nullptr;
  std::function<void()> on_close = std::move(on_close_);
  on_close_ = nullptr;
  flushed_ = nullptr;
  delete link_;
  link_ = nullptr;
  if (on_close) on_close();
}

void HttpExchange::Flushed() {
  std::function<void()> flushed = std::move(flushed_);
  flushed_ = nullptr;
  if (flushed) flushed();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              Handler handler) {
  absl::StatusOr<std::unique_ptr<HttpServer>> server = Listen(address);
  if (server.ok()) (*server)->Serve(std::move(handler));
  return server;
}

void HttpServer::Serve(Handler handler) {
  handler_ = std::move(handler);
  thread_ = std::thread([base = base_] { event_base_dispatch(base); });
}

void HttpServer::OnEvent(HttpEventObserver observer) {
  connections_->set_observer(std::move(observer));
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Listen(const std::string& address,
                                                               const HttpLimits& limits,
                                                               HttpTls* tls) {
  // Other threads wake the loop (Post): libevent must lock.
  static std::once_flag threads;
  std::call_once(threads, [] { evthread_use_pthreads(); });
  absl::StatusOr<HostPort> at = ParseHostPort(address, PortRule::kListen);
  if (!at.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "': ", at.status().message()));
  }
  std::unique_ptr<HttpServer> server(new HttpServer());
  server->base_ = event_base_new();
  server->http_ = evhttp_new(server->base_);
  evhttp_set_max_body_size(server->http_, static_cast<ev_ssize_t>(limits.max_body_bytes));
  evhttp_set_max_headers_size(server->http_, static_cast<ev_ssize_t>(limits.max_header_bytes));
  evhttp_set_allowed_methods(server->http_, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_DELETE);
  // A stream may wait long for its pipeline; the default (50 s) would cut it.
  // (A request's own arrival has its deadline: HttpLimits.)
  evhttp_set_timeout(server->http_, 3600);
  evhttp_set_gencb(server->http_, &HttpServer::OnRequest, server.get());
  server->tls_ = tls;
  server->connections_ = std::make_unique<HttpConnections>(server->base_, limits, tls != nullptr);
  evhttp_set_bevcb(server->http_, &HttpServer::NewBufferevent, server.get());
  evhttp_bound_socket* bound =
      evhttp_bind_socket_with_handle(server->http_, at->host.c_str(), static_cast<uint16_t>(at->port));
  if (bound == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  server->bound_ = bound;
  sockaddr_storage local{};
  socklen_t length = sizeof(local);
  if (getsockname(evhttp_bound_socket_get_fd(bound), reinterpret_cast<sockaddr*>(&local),
                  &length) == 0) {
    server->port_ = ntohs(local.ss_family == AF_INET6
                              ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                              : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  }
  server->wake_ = event_new(server->base_, -1, EV_PERSIST, &HttpServer::OnWake, server.get());
  event_add(server->wake_, nullptr);
  return server;
}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    stopped_ = true;
  }
  if (base_ == nullptr) return;
  if (thread_.joinable()) {
    event_base_loopbreak(base_);
    thread_.join();
  }
  // Frees every connection (each one's close is told), then what was not yet
  // taken in.
  if (http_ != nullptr) evhttp_free(http_);
  if (connections_ != nullptr) connections_->Clear();
  if (wake_ != nullptr) event_free(wake_);
  event_base_free(base_);
  base_ = nullptr;
  absl::MutexLock lock(&mu_);
  posted_.clear();
}

void HttpServer::Post(std::function<void()> task) {
  // Under the lock: Stop() frees the wake event only after `stopped_` is set.
  absl::MutexLock lock(&mu_);
  if (stopped_) return;
  posted_.push_back(std::move(task));
  event_active(wake_, EV_READ, 0);
}

void HttpServer::StopListening() {
  Post([this] {
    if (bound_ == nullptr) return;
    evhttp_del_accept_socket(http_, bound_);
    bound_ = nullptr;
  });
}

void HttpServer::OnWake(int, short, void* server) { static_cast<HttpServer*>(server)->RunPosted(); }

void HttpServer::RunPosted() {
  std::deque<std::function<void()>> tasks;
  {
    absl::MutexLock lock(&mu_);
    tasks.swap(posted_);
  }
  for (auto& task : tasks) task();
}

bufferevent* HttpServer::NewBufferevent(event_base* base, void* arg) {
  auto* server = static_cast<HttpServer*>(arg);
  bufferevent* connection =
      server->tls_ != nullptr ? NewTlsBufferevent(base, server->tls_)
                              : bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
  server->connections_->Accepted(connection);
  return connection;
}

bufferevent* HttpServer::NewTlsBufferevent(event_base* base, HttpTls* tls) {
  SSL* ssl = tls->NewSsl();
  // evhttp would take a null bufferevent for a plaintext one: never serve a
  // TLS port in the clear. (SSL_new fails only without memory.)
  if (ssl == nullptr) {
    LogError("TLS: cannot make a connection's TLS state; stopping rather than serve in the clear");
    std::abort();
  }
  bufferevent* connection = bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
                                                           BEV_OPT_CLOSE_ON_FREE);
  // Many clients close without TLS's close_notify; that ends the connection,
  // it is no error.
  bufferevent_openssl_set_allow_dirty_shutdown(connection, 1);
  return connection;
}

void HttpServer::OnRequest(evhttp_request* request, void* server) {
  // Events are small writes that must go out at once: without TCP_NODELAY
  // each waits for the client's delayed ACK (~40 ms). libevent does not set
  // it on accepted connections; setting it again on a kept-alive one is free.
  if (evhttp_connection* connection = evhttp_request_get_connection(request)) {
    if (bufferevent* buffered = evhttp_connection_get_bufferevent(connection)) {
      const int fd = bufferevent_getfd(buffered);
      const int on = 1;
      if (fd >= 0) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    }
  }
  auto* self = static_cast<HttpServer*>(server);
  HttpConnection* connection = nullptr;
  // Refused there (and answered): nothing for the handler.
  if (!self->connections_->Request(request, &connection)) return;
  std::shared_ptr<HttpExchange> exchange(new HttpExchange(request, connection));
  exchange->StartSpan(self->tracer_);
  exchange->Attach();
  self->handler_(std::move(exchange));
}

}  // namespace omnistage
