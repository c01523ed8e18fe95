// RecordedReply: an answer kept in memory rather than sent to a client, for
// the requests the gateway makes of its own routes' calls (the Batch API's
// lines run as chat completions and speech, the same calls a client's
// request makes). It keeps the status, headers, content type and body (a
// stream's chunks joined); `ended` runs once, when the response ended or
// Close() cut it.
//
//   auto reply = std::make_shared<RecordedReply>(post, [](const RecordedReply& r) {
//     Use(r.status(), r.body());
//   });
//   ChatCall::Start(..., reply, ...);
//
// Loop thread only; `post` runs a task later on the loop (a stream's flushed
// hooks, never within Send).
#ifndef OMNISTAGE_GATEWAY_HTTP_RECORDED_REPLY_H_
#define OMNISTAGE_GATEWAY_HTTP_RECORDED_REPLY_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gateway/http/http_reply.h"

namespace omnistage {

class RecordedReply final : public HttpReply {
 public:
  using Poster = std::function<void(std::function<void()>)>;
  using Ended = std::function<void(const RecordedReply& reply)>;

  RecordedReply(Poster post, Ended ended) : post_(std::move(post)), ended_(std::move(ended)) {}

  void AddHeader(const std::string& name, const std::string& value) override;
  void Respond(int status, const std::string& content_type, const std::string& body) override;
  void StartStream(int status, const std::string& content_type) override;
  void Send(const std::string& data, std::function<void()> flushed = nullptr) override;
  void EndStream() override;
  void OnClose(std::function<void()> on_close) override;
  bool done() const override { return done_; }
  bool streaming() const override { return streaming_; }

  // Gives up on the answer, as a client that goes away: the OnClose hook
  // runs (the call is cancelled) and `ended` with closed() true. Nothing
  // once the response ended.
  void Close();

  // 0 until a response began.
  int status() const { return status_; }
  const std::string& content_type() const { return content_type_; }
  const std::string& body() const { return body_; }
  const std::vector<std::pair<std::string, std::string>>& headers() const { return headers_; }
  // Close() ended it, not the response.
  bool closed() const { return closed_; }

 private:
  void End();

  const Poster post_;
  Ended ended_;
  std::function<void()> on_close_;
  std::vector<std::pair<std::string, std::string>> headers_;
  int status_ = 0;
  std::string content_type_;
  std::string body_;
  bool streaming_ = false;
  bool done_ = false;
  bool closed_ = false;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_HTTP_RECORDED_REPLY_H_
