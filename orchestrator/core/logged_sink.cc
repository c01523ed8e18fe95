#include "orchestrator/core/logged_sink.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

LoggedSink::LoggedSink(std::shared_ptr<ResponseSink> inner, std::string trace_id)
    : inner_(std::move(inner)), trace_id_(std::move(trace_id)) {}

void LoggedSink::Finish(const std::string& request_id, v1::Terminal terminal) {
  switch (terminal.finish_reason()) {
    case v1::FINISH_REASON_ERROR: {
      const v1::Error& error = terminal.error();
      LogWarning({request_id, error.stage_id(), error.replica(), trace_id_},
                 absl::StrCat("failed: ",
                              absl::StatusCodeToString(static_cast<absl::StatusCode>(error.code())),
                              ": ", error.message()));
      break;
    }
    case v1::FINISH_REASON_ABORT:
      LogInfo({request_id, -1, -1, trace_id_}, "aborted");
      break;
    default:
      Log(LogLevel::kDebug, {request_id, -1, -1, trace_id_},
          absl::StrCat("finished: ", v1::FinishReason_Name(terminal.finish_reason())));
  }
  inner_->Finish(request_id, std::move(terminal));
}

void LoggedSink::Fail(const absl::Status& status) {
  Log(LogLevel::kDebug, {"", -1, -1, trace_id_},
      absl::StrCat("refused: ", absl::StatusCodeToString(status.code()), ": ", status.message()));
  inner_->Fail(status);
}

}  // namespace omnistage
