// PipelineCore::Request: the state of one in-flight request. Private to the
// PipelineCore implementation files.
#ifndef OMNISTAGE_ORCHESTRATOR_PIPELINE_REQUEST_H_
#define OMNISTAGE_ORCHESTRATOR_PIPELINE_REQUEST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/event_loop.h"
#include "orchestrator/pipeline_core.h"
#include "orchestrator/response_sink.h"
#include "protos/common.pb.h"
#include "protos/stage_worker.pb.h"

namespace omnistage {

struct PipelineCore::Request {
  struct Stage {
    bool started = false;
    bool finished = false;
    int replica = -1;
    v1::FinishReason reason = v1::FINISH_REASON_UNSPECIFIED;
    // on_finish hand-off: the previous stage's output so far.
    std::vector<v1::Payload> pending_input;
  };
  struct Deferred {
    int stage;
    int replica;
    v1::RequestOutput output;
  };

  std::string id;
  std::shared_ptr<ResponseSink> sink;
  std::vector<v1::StageParameters> params;  // per stage, defaults merged
  std::vector<bool> to_client;               // stage output streams to the client
  int last_stage = 0;                        // the last stage this request needs
  std::vector<Stage> stages;
  // What the client-facing stages produced, for an abort's partial output.
  std::vector<std::string> partial_text;
  std::vector<std::vector<int32_t>> partial_tokens;
  // The two-phase aborts running for it (a client may retry an Abort still in
  // flight); while non-zero, outputs wait in `deferred`, replayed once the last
  // of them failed. The first to succeed ends the request.
  int aborting = 0;
  std::vector<Deferred> deferred;
  absl::Time last_activity;
  EventLoop::TimerId idle_timer = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_PIPELINE_REQUEST_H_
