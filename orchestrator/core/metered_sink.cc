#include "orchestrator/core/metered_sink.h"

#include <utility>

namespace omnistage {

MeteredSink::MeteredSink(std::shared_ptr<ResponseSink> inner, PipelineMetrics* metrics,
                         const Scheduler* scheduler)
    : inner_(std::move(inner)),
      metrics_(metrics),
      scheduler_(scheduler),
      admitted_(scheduler->Now()) {}

void MeteredSink::Started(const std::string& request_id) { inner_->Started(request_id); }

void MeteredSink::Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) {
  const absl::Time now = scheduler_->Now();
  for (const v1::OutputChunk& chunk : chunks) {
    if (seen_.insert(chunk.modality()).second) {
      metrics_->FirstOutput(chunk.modality(), now - admitted_);
    }
  }
  if (responded_) metrics_->BetweenOutputs(now - last_response_);
  responded_ = true;
  last_response_ = now;
  inner_->Send(request_id, std::move(chunks));
}

void MeteredSink::Finish(const std::string& request_id, v1::Terminal terminal) {
  metrics_->Finished(terminal.finish_reason(), scheduler_->Now() - admitted_);
  inner_->Finish(request_id, std::move(terminal));
}

void MeteredSink::Fail(const absl::Status& status) {
  metrics_->Refused(status.code());
  inner_->Fail(status);
}

}  // namespace omnistage
