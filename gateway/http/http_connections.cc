#include "gateway/http/http_connections.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/socket.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "gateway/http/api_error.h"

namespace omnistage {

struct HttpConnection {
  HttpConnections* owner = nullptr;
  bufferevent* bev = nullptr;
  // A reference on `bev` is held until the connection is taken in (evhttp may
  // free it before that; its memory stays ours to look at).
  bool held = false;
  // Set once taken in.
  evhttp_connection* evcon = nullptr;
  std::string address;
  // First the turn of the loop that takes the connection in, then the
  // deadline for a whole request.
  event* timer = nullptr;
  // No request is with the handler: one is awaited.
  bool awaiting = true;
  // libevent answered by itself during this wait (counted once), where its
  // answer starts in the output, and whether it was rewritten as JSON.
  bool answered_alone = false;
  size_t answer_at = 0;
  bool rewritten = false;
  evbuffer_cb_entry* output_watch = nullptr;
  // Its close is being told (OnClosed).
  bool closing = false;
  void (*close_hook)(void*) = nullptr;
  void* close_hook_arg = nullptr;
};

namespace {

// A refusal's answer, as the OpenAI API shapes errors.
std::string RefusalBody(HttpEvent why, const std::string& address, const HttpLimits& limits) {
  ApiError error{503, "server_error", "", "", "too_many_connections", std::nullopt};
  switch (why) {
    case HttpEvent::kRefusedMaxConnections:
      error.message = absl::StrCat("the gateway holds as many connections as it takes (",
                                   limits.max_connections, "); retry later");
      break;
    case HttpEvent::kRefusedMaxConnectionsPerAddress:
      error.message = absl::StrCat("too many connections from ", address, " (the gateway takes ",
                                   limits.max_connections_per_address,
                                   " per address); close some, or retry later");
      break;
    default:
      error = ApiError{431,
                       "invalid_request_error",
                       absl::StrCat("more than ", limits.max_headers, " header lines"),
                       "",
                       "request_header_fields_too_large",
                       std::nullopt};
      break;
  }
  return error.Json();
}

// libevent's own answer with status `code`, in OpenAI's shape.
ApiError AnsweredAlone(int code, const HttpLimits& limits) {
  if (code == 413) {
    return ApiError{413,
                    "invalid_request_error",
                    absl::StrCat("the request body is larger than the gateway takes (",
                                 limits.max_body_bytes, " bytes)"),
                    "",
                    "request_too_large",
                    std::nullopt};
  }
  if (code == 501) {
    return ApiError{501, "invalid_request_error", "the gateway answers GET and POST requests only",
                    "",  "method_not_supported",  std::nullopt};
  }
  return ApiError{code,
                  "invalid_request_error",
                  absl::StrCat("not an HTTP request the gateway can read: a malformed request "
                               "line, header or body framing, or a line and headers past ",
                               limits.max_header_bytes, " bytes"),
                  "",
                  "bad_request",
                  std::nullopt};
}

// Answers `request` and closes its connection after.
void AnswerAndClose(evhttp_request* request, int status, const std::string& body) {
  evkeyvalq* headers = evhttp_request_get_output_headers(request);
  evhttp_add_header(headers, "Content-Type", "application/json");
  evhttp_add_header(headers, "Connection", "close");
  evbuffer* buffer = evbuffer_new();
  evbuffer_add(buffer, body.data(), body.size());
  evhttp_send_reply(request, status, status == 431 ? "Request Header Fields Too Large" : nullptr,
                    buffer);
  evbuffer_free(buffer);
}

}  // namespace

const char* HttpRefusalName(HttpEvent event) {
  switch (event) {
    case HttpEvent::kRefusedMaxConnections:
      return "max_connections";
    case HttpEvent::kRefusedMaxConnectionsPerAddress:
      return "max_connections_per_address";
    case HttpEvent::kRequestReadTimeout:
      return "request_read_timeout";
    case HttpEvent::kRefusedMaxHeaders:
      return "max_headers";
    case HttpEvent::kRefusedBadRequest:
      return "bad_request";
    case HttpEvent::kRefusedBodyTooLarge:
      return "body_too_large";
    case HttpEvent::kRefusedMethod:
      return "method";
    default:
      return "";
  }
}

HttpConnections::HttpConnections(event_base* base, const HttpLimits& limits, bool tls)
    : base_(base), limits_(limits), tls_(tls) {}

HttpConnections::~HttpConnections() { Clear(); }

void HttpConnections::Tell(HttpEvent event) {
  if (observer_) observer_(event);
}

void HttpConnections::Accepted(bufferevent* bev) {
  if (bev == nullptr) return;
  auto connection = std::make_unique<HttpConnection>();
  connection->owner = this;
  connection->bev = bev;
  bufferevent_incref(bev);
  connection->held = true;
  connection->timer = evtimer_new(base_, &HttpConnections::OnTimer, connection.get());
  // What libevent answers by itself, even before the connection is taken in.
  connection->output_watch =
      evbuffer_add_cb(bufferevent_get_output(bev), &HttpConnections::OnOutput, connection.get());
  // evhttp sets the socket and its callbacks up once this hook returns.
  const timeval now{0, 0};
  evtimer_add(connection->timer, &now);
  connections_[bev] = std::move(connection);
}

HttpConnections::Admission HttpConnections::Admit(HttpConnection* c, HttpEvent* refusal) {
  // evhttp made its connection around our bufferevent, whose callbacks it set
  // with the connection as their argument: a bufferevent it already freed has
  // none.
  bufferevent_data_cb read = nullptr;
  void* arg = nullptr;
  bufferevent_getcb(c->bev, &read, nullptr, nullptr, &arg);
  if (read == nullptr || arg == nullptr ||
      evhttp_connection_get_bufferevent(static_cast<evhttp_connection*>(arg)) != c->bev) {
    return Admission::kGone;
  }
  c->evcon = static_cast<evhttp_connection*>(arg);
  char* host = nullptr;
  ev_uint16_t port = 0;
  evhttp_connection_get_peer(c->evcon, &host, &port);
  c->address = host != nullptr ? host : "";
  if (limits_.max_connections > 0 && open_ >= limits_.max_connections) {
    *refusal = HttpEvent::kRefusedMaxConnections;
    return Admission::kRefused;
  }
  int& from_address = per_address_[c->address];
  if (limits_.max_connections_per_address > 0 &&
      from_address >= limits_.max_connections_per_address) {
    if (from_address == 0) per_address_.erase(c->address);
    *refusal = HttpEvent::kRefusedMaxConnectionsPerAddress;
    return Admission::kRefused;
  }
  ++from_address;
  ++open_;
  evhttp_connection_set_closecb(c->evcon, &HttpConnections::OnClosed, c);
  // From here on its close is told (OnClosed): the reference can go.
  c->held = false;
  bufferevent_decref(c->bev);
  Tell(HttpEvent::kConnectionOpened);
  return Admission::kAdmitted;
}

void HttpConnections::AwaitRequest(HttpConnection* c) {
  c->awaiting = true;
  c->answered_alone = false;
  c->rewritten = false;
  if (limits_.request_read_timeout <= absl::ZeroDuration()) return;
  const timeval deadline = absl::ToTimeval(limits_.request_read_timeout);
  evtimer_add(c->timer, &deadline);
}

void HttpConnections::Drop(HttpConnection* c) {
  if (c->timer != nullptr) event_free(c->timer);
  c->timer = nullptr;
  // Its bufferevent is ours to look at while held, and while its close is told.
  if (c->output_watch != nullptr && (c->held || c->closing)) {
    evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->output_watch);
  }
  c->output_watch = nullptr;
  if (c->held) bufferevent_decref(c->bev);
  c->held = false;
  connections_.erase(c->bev);  // Deletes `c`.
}

void HttpConnections::OnTimer(int, short, void* arg) {
  auto* c = static_cast<HttpConnection*>(arg);
  HttpConnections* self = c->owner;
  if (c->evcon != nullptr) {
    // The deadline: no whole request came.
    if (!c->awaiting) return;
    self->Tell(HttpEvent::kRequestReadTimeout);
    evhttp_connection_free(c->evcon);  // OnClosed forgets it.
    return;
  }
  HttpEvent refusal = HttpEvent::kConnectionOpened;
  switch (self->Admit(c, &refusal)) {
    case Admission::kAdmitted:
      self->AwaitRequest(c);
      return;
    case Admission::kGone:
      self->Drop(c);
      return;
    case Admission::kRefused:
      break;
  }
  self->Tell(refusal);
  const evutil_socket_t fd = bufferevent_getfd(c->bev);
  if (!self->tls_ && fd >= 0) {
    // Nothing was read from it yet: the answer goes straight to the socket
    // (a few hundred bytes into an empty send buffer), and what the client
    // sent is read away so that the close does not reset the connection
    // under the answer.
    const std::string body = RefusalBody(refusal, c->address, self->limits_);
    const std::string answer =
        absl::StrCat("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n",
                     "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
    (void)send(fd, answer.data(), answer.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    char sink[4096];
    for (int i = 0; i < 16 && recv(fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
    }
  }
  evhttp_connection* evcon = c->evcon;
  self->Drop(c);
  evhttp_connection_free(evcon);
}

bool HttpConnections::Request(evhttp_request* request, HttpConnection** connection) {
  *connection = nullptr;
  evhttp_connection* evcon = evhttp_request_get_connection(request);
  auto it = evcon == nullptr ? connections_.end()
                             : connections_.find(evhttp_connection_get_bufferevent(evcon));
  if (it == connections_.end()) {
    LogError("HTTP: a request on a connection that was never seen; serving it unwatched");
    return true;
  }
  HttpConnection* c = it->second.get();
  // The handler has it (or a refusal answers it): not libevent's own answer.
  c->awaiting = false;
  if (c->evcon == nullptr) {
    // Its first request came before the loop's turn that takes it in.
    HttpEvent refusal = HttpEvent::kConnectionOpened;
    const Admission admission = Admit(c, &refusal);
    if (admission != Admission::kAdmitted) {
      if (admission == Admission::kRefused) {
        Tell(refusal);
        AnswerAndClose(request, 503, RefusalBody(refusal, c->address, limits_));
        Drop(c);
        return false;
      }
      Drop(c);  // Gone, which cannot be while its request is here: serve it unwatched.
      return true;
    }
  }
  evtimer_del(c->timer);
  evhttp_request_set_on_complete_cb(request, &HttpConnections::OnComplete, c);
  if (limits_.max_headers > 0) {
    int lines = 0;
    const evkeyvalq* headers = evhttp_request_get_input_headers(request);
    for (const evkeyval* h = headers->tqh_first; h != nullptr; h = h->next.tqe_next) ++lines;
    if (lines > limits_.max_headers) {
      Tell(HttpEvent::kRefusedMaxHeaders);
      AnswerAndClose(request, 431, RefusalBody(HttpEvent::kRefusedMaxHeaders, "", limits_));
      return false;
    }
  }
  *connection = c;
  return true;
}

void HttpConnections::SetCloseHook(HttpConnection* c, void (*hook)(void*), void* arg) {
  if (c == nullptr) return;
  c->close_hook = hook;
  c->close_hook_arg = arg;
}

void HttpConnections::OnComplete(evhttp_request*, void* arg) {
  // The response went out whole; the connection awaits its next request (or
  // closes, which OnClosed hears).
  auto* c = static_cast<HttpConnection*>(arg);
  c->owner->AwaitRequest(c);
}

void HttpConnections::OnOutput(evbuffer* output, const evbuffer_cb_info* info, void* arg) {
  auto* c = static_cast<HttpConnection*>(arg);
  if (info->n_added == 0 || !c->awaiting) return;
  if (c->answered_alone) {
    if (!c->rewritten) Rewrite(c, output);
    return;
  }
  // libevent answers a request by itself (the handler has none): its status
  // line comes first, "HTTP/1.1 400 Bad Request".
  char status[12];
  if (evbuffer_copyout(output, status, sizeof(status)) != static_cast<ev_ssize_t>(sizeof(status))) {
    return;
  }
  const std::string code(status + 9, 3);
  // "100 Continue" to a client that asked before sending its body: no refusal.
  if (code[0] == '1') return;
  c->answered_alone = true;
  c->answer_at = info->orig_size;
  c->owner->Tell(code == "413"   ? HttpEvent::kRefusedBodyTooLarge
                 : code == "501" ? HttpEvent::kRefusedMethod
                                 : HttpEvent::kRefusedBadRequest);
}

void HttpConnections::Rewrite(HttpConnection* c, evbuffer* output) {
  // libevent adds its answer piece by piece (the status line, each header,
  // the page), all before it sends any: once the page is whole, it is
  // replaced.
  const size_t length = evbuffer_get_length(output);
  std::string bytes(length, '\0');
  if (length <= c->answer_at ||
      evbuffer_copyout(output, bytes.data(), length) != static_cast<ev_ssize_t>(length)) {
    return;
  }
  const size_t line_end = bytes.find("\r\n", c->answer_at);
  const size_t head_end = bytes.find("\r\n\r\n", c->answer_at);
  if (line_end == std::string::npos || head_end == std::string::npos) return;
  size_t page = 0;
  constexpr char kLength[] = "\r\ncontent-length: ";
  const std::string head = absl::AsciiStrToLower(bytes.substr(line_end, head_end - line_end));
  if (const size_t at = head.find(kLength); at != std::string::npos) {
    const size_t from = at + sizeof(kLength) - 1;
    if (!absl::SimpleAtoi(head.substr(from, head.find("\r\n", from) - from), &page)) return;
  }
  if (length < head_end + 4 + page) return;  // The page is not whole yet.
  int code = 0;
  if (!absl::SimpleAtoi(bytes.substr(c->answer_at + 9, 3), &code)) return;
  const std::string body = AnsweredAlone(code, c->owner->limits_).Json();
  std::string answer = bytes.substr(0, line_end);  // what came before, and the status line
  absl::StrAppend(&answer, "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                  "\r\nConnection: close\r\n\r\n", body, bytes.substr(head_end + 4 + page));
  c->rewritten = true;  // Before the changes below call back.
  evbuffer_drain(output, length);
  evbuffer_add(output, answer.data(), answer.size());
}

void HttpConnections::OnClosed(evhttp_connection* evcon, void* arg) {
  auto* c = static_cast<HttpConnection*>(arg);
  HttpConnections* self = c->owner;
  evhttp_connection_set_closecb(evcon, nullptr, nullptr);
  c->closing = true;
  void (*hook)(void*) = c->close_hook;
  void* hook_arg = c->close_hook_arg;
  --self->open_;
  auto from_address = self->per_address_.find(c->address);
  if (from_address != self->per_address_.end() && --from_address->second <= 0) {
    self->per_address_.erase(from_address);
  }
  self->Drop(c);
  self->Tell(HttpEvent::kConnectionClosed);
  if (hook != nullptr) hook(hook_arg);
}

void HttpConnections::Clear() {
  while (!connections_.empty()) Drop(connections_.begin()->second.get());
  per_address_.clear();
  open_ = 0;
}

}  // namespace omnistage
