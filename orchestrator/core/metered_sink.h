// MeteredSink: a ResponseSink decorator that measures what one Generate call's
// client receives — time to the first output of each modality, the gaps
// between responses, the end-to-end time and finish reason, or the refusal —
// and passes every call on unchanged.
//
//   auto sink = std::make_shared<MeteredSink>(std::move(client), &metrics, scheduler);
//
// Called on the event loop, like the sink it wraps.
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_METERED_SINK_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_METERED_SINK_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/scheduler.h"
#include "orchestrator/core/pipeline_metrics.h"
#include "orchestrator/core/response_sink.h"

namespace omnistage {

class MeteredSink : public ResponseSink {
 public:
  // The clock starts now (admission). `metrics` and `scheduler` are not owned.
  MeteredSink(std::shared_ptr<ResponseSink> inner, PipelineMetrics* metrics,
              const Scheduler* scheduler);

  // The client's own sink (what cancellations name).
  const ResponseSink* inner() const { return inner_.get(); }

  void Started(const std::string& request_id) override;
  void Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) override;
  void Finish(const std::string& request_id, v1::Terminal terminal) override;
  void Fail(const absl::Status& status) override;

 private:
  const std::shared_ptr<ResponseSink> inner_;
  PipelineMetrics* const metrics_;
  const Scheduler* const scheduler_;
  const absl::Time admitted_;
  absl::Time last_response_;
  bool responded_ = false;
  std::set<v1::Modality> seen_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_METERED_SINK_H_
