#include "fuzz/checking_sink.h"

#include "fuzz/fuzz_check.h"

namespace omnistage {
namespace fuzz {

void CheckingSink::Started(const std::string& request_id) {
  FUZZ_CHECK(!started_, label_, ": Started twice (", id_, ", then ", request_id, ")");
  FUZZ_CHECK(!ended(), label_, ": Started after its call ended");
  FUZZ_CHECK(!request_id.empty(), label_, ": admitted without an id");
  started_ = true;
  id_ = request_id;
}

void CheckingSink::Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) {
  FUZZ_CHECK(started_, label_, ": output before the request started");
  FUZZ_CHECK(!ended(), label_, ": output for ", request_id, " after its terminal");
  FUZZ_CHECK(request_id == id_, label_, ": output for ", request_id, " on the call of ", id_);
  FUZZ_CHECK(!chunks.empty(), label_, ": an empty Send");
  for (v1::OutputChunk& chunk : chunks) {
    FUZZ_CHECK(chunk.payload().kind_case() != v1::Payload::KIND_NOT_SET, label_,
               ": a chunk without a payload");
    chunks_.push_back(std::move(chunk));
  }
}

void CheckingSink::Finish(const std::string& request_id, v1::Terminal terminal) {
  FUZZ_CHECK(started_, label_, ": a terminal before the request started");
  FUZZ_CHECK(!finished_, label_, ": a second terminal for ", request_id, " (first ",
             v1::FinishReason_Name(terminal_.finish_reason()), ", then ",
             v1::FinishReason_Name(terminal.finish_reason()), ")");
  FUZZ_CHECK(!failed_, label_, ": a terminal after the call failed");
  FUZZ_CHECK(request_id == id_, label_, ": the terminal of ", request_id, " on the call of ", id_);
  const v1::FinishReason reason = terminal.finish_reason();
  FUZZ_CHECK(reason != v1::FINISH_REASON_UNSPECIFIED, label_, ": a terminal without a reason");
  FUZZ_CHECK((reason == v1::FINISH_REASON_ERROR) == terminal.has_error(), label_, ": a ",
             v1::FinishReason_Name(reason), " terminal ",
             terminal.has_error() ? "with" : "without", " an error");
  FUZZ_CHECK(!terminal.has_error() || !terminal.error().message().empty(), label_,
             ": an error terminal without a message");
  FUZZ_CHECK(reason == v1::FINISH_REASON_ABORT || terminal.partial_output_size() == 0, label_,
             ": partial output on a ", v1::FinishReason_Name(reason), " terminal");
  finished_ = true;
  terminal_ = std::move(terminal);
  if (on_finish_) on_finish_(id_, terminal_);
}

void CheckingSink::Fail(const absl::Status& status) {
  FUZZ_CHECK(!started_, label_, ": the call of admitted ", id_, " failed instead of a terminal: ",
             status.ToString());
  FUZZ_CHECK(!failed_, label_, ": failed twice: ", failure_.ToString(), ", then ",
             status.ToString());
  FUZZ_CHECK(!status.ok(), label_, ": failed with OK");
  failed_ = true;
  failure_ = status;
}

}  // namespace fuzz
}  // namespace omnistage
