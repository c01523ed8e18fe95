#include "gateway/http/recorded_reply.h"

namespace omnistage {

void RecordedReply::AddHeader(const std::string& name, const std::string& value) {
  if (!done_) headers_.emplace_back(name, value);
}

void RecordedReply::Respond(int status, const std::string& content_type, const std::string& body) {
  if (done_) return;
  status_ = status;
  content_type_ = content_type;
  body_ = body;
  End();
}

void RecordedReply::StartStream(int status, const std::string& content_type) {
  if (done_) return;
  status_ = status;
  content_type_ = content_type;
  streaming_ = true;
}

void RecordedReply::Send(const std::string& data, std::function<void()> flushed) {
  if (done_) return;
  body_ += data;
  if (flushed) post_(std::move(flushed));
}

void RecordedReply::EndStream() {
  if (!done_) End();
}

void RecordedReply::OnClose(std::function<void()> on_close) { on_close_ = std::move(on_close); }

void RecordedReply::Close() {
  if (done_) return;
  closed_ = true;
  done_ = true;
  // The hook (a call's cancel) may end the call, which then finds it done.
  if (std::function<void()> hook = std::move(on_close_)) hook();
  if (Ended ended = std::move(ended_)) ended(*this);
}

void RecordedReply::End() {
  done_ = true;
  on_close_ = nullptr;
  if (Ended ended = std::move(ended_)) ended(*this);
}

}  // namespace omnistage
