// A Batch API line run (docs/openai.md, "Batches"): its body read as its
// endpoint's request and made through the same call a client's request
// makes (ChatCall, SpeechCall), answered into a RecordedReply, as the
// batch's owner (GenerateRequest.on_behalf_of) and as work that can wait
// (GenerateRequest.batch); then its line of the output file (a 200) or the
// error file (another status), or a retry (the pipeline was full or out of
// reach: 429, 503, 504; the gateway's own token refused: 401).
//
//   std::shared_ptr<RecordedReply> reply = RunBatchLine(line, targets, post,
//       [](BatchLineOutcome outcome) { ... record it ... });
//
// Loop thread only.
#ifndef OMNISTAGE_GATEWAY_BATCH_LINE_H_
#define OMNISTAGE_GATEWAY_BATCH_LINE_H_

#include <functional>
#include <memory>
#include <string>

#include "gateway/batch/batch_lines.h"
#include "gateway/chat/chat_request.h"
#include "gateway/chat/response_reader.h"
#include "gateway/http/recorded_reply.h"
#include "gateway/orchestrators.h"
#include "gateway/speech/speech_request.h"

namespace omnistage {

// Where a batch's lines go.
struct BatchTargets {
  // /v1/chat/completions: the main pipeline, as the gateway serves it.
  Orchestrators* chat = nullptr;
  ServedModel model;
  // /v1/audio/speech: the speech pipeline (null: none).
  Orchestrators* speech = nullptr;
  SpeechModels speech_models;
  // The gateway's own Authorization ("Bearer <token>"; "" without tokens).
  std::string authorization;
};

struct BatchLineOutcome {
  enum class Kind {
    kDone,       // `result` goes to the output file
    kFailed,     // `result` goes to the error file
    kRetry,      // run it again later
    kAbandoned,  // the reply was closed (the gateway stops): unrecorded
  };
  Kind kind = Kind::kFailed;
  std::string result;
  // The HTTP status the call answered, and for logs why it failed.
  int status = 0;
  std::string reason;
};

// Starts `line`; `done` runs once on the loop (posted, never within this
// call). The reply may be closed to give the line up.
std::shared_ptr<RecordedReply> RunBatchLine(const ClaimedLine& line, const BatchTargets& targets,
                                            LoopPoster post,
                                            std::function<void(BatchLineOutcome)> done);

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_BATCH_LINE_H_
