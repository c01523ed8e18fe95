// HttpReply: where a route's call writes its answer: a whole response, or
// one streamed in chunks. An HttpExchange sends it to its client
// (http_server.h); a RecordedReply keeps it (the gateway's own requests:
// the Batch API's lines).
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_HTTP_HTTP_REPLY_H_
#define OMNISTAGE_GATEWAY_HTTP_HTTP_REPLY_H_

#include <functional>
#include <string>

namespace omnistage {

class HttpReply {
 public:
  virtual ~HttpReply() = default;

  // A header of the response to come (before Respond or StartStream).
  virtual void AddHeader(const std::string& name, const std::string& value) = 0;
  // A whole response.
  virtual void Respond(int status, const std::string& content_type, const std::string& body) = 0;
  // A response streamed in chunks.
  virtual void StartStream(int status, const std::string& content_type) = 0;
  // Sends `data`; `flushed` (may be empty) runs once it was handed on (to
  // the socket), never within the call, so a producer can wait for a slow
  // reader before making more.
  virtual void Send(const std::string& data, std::function<void()> flushed = nullptr) = 0;
  virtual void EndStream() = 0;
  // Runs once if the reader goes away before the response ended.
  virtual void OnClose(std::function<void()> on_close) = 0;
  // The response ended, or the reader went away: nothing more is sent.
  virtual bool done() const = 0;
  virtual bool streaming() const = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_HTTP_REPLY_H_
