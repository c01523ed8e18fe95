// LoggedSink: a ResponseSink decorator that logs how one Generate call ended,
// with its request id and trace id — failed (warning, naming the stage and
// replica that failed it), aborted (info), finished (debug), or refused
// before it started (debug) — and passes every call on unchanged. Its
// sibling MeteredSink measures the same calls.
//
// Called on the event loop, like the sink it wraps.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_LOGGED_SINK_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_LOGGED_SINK_H_

#include <memory>
#include <string>
#include <vector>

#include "orchestrator/core/response_sink.h"

namespace omnistage {

class LoggedSink : public ResponseSink {
 public:
  // `trace_id`: the request's W3C trace id, or empty.
  LoggedSink(std::shared_ptr<ResponseSink> inner, std::string trace_id);

  void Started(const std::string& request_id) override { inner_->Started(request_id); }
  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override {
    inner_->Send(request_id, std::move(chunks));
  }
  void Finish(const std::string& request_id, v1::Terminal terminal) override;
  void Fail(const absl::Status& status) override;

 private:
  const std::shared_ptr<ResponseSink> inner_;
  const std::string trace_id_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_LOGGED_SINK_H_
