#include "tests/generate_call.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/production_stamp.h"

namespace omnistage {

std::chrono::system_clock::time_point DeadlineIn(absl::Duration timeout) {
  return absl::ToChronoTime(absl::Now() + timeout);
}

std::string GenerateResult::Summary() const {
  std::string summary = absl::StrCat(
      "id=", request_id, " text=", text.size(), "B audio=", audio.size(),
      "B tokens=", tokens.size(), " responses=", responses, " terminals=", terminals,
      " reason=", v1::FinishReason_Name(terminal.finish_reason()), " status=", status.error_code());
  if (terminal.has_error()) {
    absl::StrAppend(&summary, " error='", terminal.error().message(), "'");
  }
  if (!status.ok()) absl::StrAppend(&summary, " status_message='", status.error_message(), "'");
  return summary;
}

v1::GenerateRequest MakeRequest(const std::string& id, const std::string& prompt,
                                std::vector<v1::StageParameters> stage_params) {
  v1::GenerateRequest request;
  request.set_request_id(id);
  request.set_prompt(prompt);
  for (v1::StageParameters& params : stage_params) *request.add_stage_params() = std::move(params);
  return request;
}

v1::StageParameters StageParams(int stage, uint32_t max_tokens,
                                std::vector<std::pair<std::string, std::string>> extra) {
  v1::StageParameters params;
  params.set_stage_id(stage);
  params.set_max_tokens(max_tokens);
  for (auto& [key, value] : extra) (*params.mutable_extra())[key] = value;
  return params;
}

bool Eventually(const std::function<bool()>& condition, absl::Duration timeout,
                absl::Duration poll) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(poll);
  }
}

GenerateCall::GenerateCall(std::shared_ptr<v1::Orchestrator::Stub> stub,
                           v1::GenerateRequest request, absl::Duration deadline,
                           const std::string& token)
    : stub_(std::move(stub)) {
  // A safety net so that no test thread can hang forever.
  context_.set_deadline(DeadlineIn(deadline));
  if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
  thread_ =
      std::thread([this, request = std::move(request)]() mutable { Run(std::move(request)); });
}

GenerateCall::GenerateCall(std::shared_ptr<v1::Orchestrator::Stub> stub,
                           v1::GenerateRequest request, absl::Duration deadline,
                           const std::string& token, DuplexTag)
    : stub_(std::move(stub)) {
  context_.set_deadline(DeadlineIn(deadline));
  if (!token.empty()) context_.AddMetadata("authorization", "Bearer " + token);
  duplex_ = stub_->GenerateDuplex(&context_);
  v1::GenerateInput first;
  *first.mutable_request() = std::move(request);
  duplex_->Write(first);  // A refusal shows in the call's status.
  thread_ = std::thread([this] { Read(*duplex_); });
}

bool GenerateCall::Send(std::vector<v1::Payload> payloads, bool last) {
  v1::GenerateInput message;
  for (v1::Payload& p : payloads) *message.mutable_input()->add_payloads() = std::move(p);
  message.mutable_input()->set_last(last);
  return Send(message);
}

bool GenerateCall::Send(const v1::GenerateInput& message) {
  absl::MutexLock lock(&write_mu_);
  return !finished_ && duplex_->Write(message);
}

bool GenerateCall::CloseInput() {
  absl::MutexLock lock(&write_mu_);
  return !finished_ && duplex_->WritesDone();
}

GenerateCall::~GenerateCall() {
  context_.TryCancel();
  if (thread_.joinable()) thread_.join();
}

void GenerateCall::Run(v1::GenerateRequest request) {
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub_->Generate(&context_, request);
  Read(*reader);
}

template <typename Stream>
void GenerateCall::Read(Stream& reader) {
  v1::GenerateResponse response;
  while (reader.Read(&response)) {
    absl::MutexLock lock(&mu_);
    GenerateResult& r = result_;
    ++r.responses;
    if (r.request_id.empty()) r.request_id = response.request_id();
    if (r.terminals > 0) ++r.responses_after_terminal;
    for (const v1::OutputChunk& chunk : response.outputs()) {
      ++r.output_chunks;
      const v1::Payload& payload = chunk.payload();
      if (payload.has_text()) {
        r.text += payload.text().text();
        r.stage_text[chunk.stage_id()] += payload.text().text();
        if (r.first_text_response == 0) r.first_text_response = r.responses;
      }
      if (payload.has_audio()) {
        r.audio += payload.audio().pcm_s16le();
        if (r.first_audio_response == 0) r.first_audio_response = r.responses;
      }
      if (payload.has_tokens()) {
        r.tokens.insert(r.tokens.end(), payload.tokens().ids().begin(),
                        payload.tokens().ids().end());
      }
      if (std::optional<int64_t> stamp = StampOf(payload)) r.stamps.push_back(*stamp);
    }
    if (response.has_terminal()) {
      if (r.terminals == 0) {
        r.terminal = response.terminal();
        r.terminal_response = r.responses;
      }
      ++r.terminals;
    } else if (response.outputs_size() > 0) {
      ++r.responses_with_outputs_before_terminal;
    }
    changed_.SignalAll();
  }
  grpc::Status status;
  {
    // Not while the test thread writes (GenerateDuplex).
    absl::MutexLock lock(&write_mu_);
    finished_ = true;
    status = reader.Finish();
  }
  absl::MutexLock lock(&mu_);
  result_.status = std::move(status);
  result_.done = true;
  changed_.SignalAll();
}

bool GenerateCall::WaitUntil(const std::function<bool(const GenerateResult&)>& predicate,
                             absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (true) {
    if (predicate(result_)) return true;
    if (result_.done) return false;
    if (changed_.WaitWithDeadline(&mu_, deadline)) return predicate(result_);  // Timed out.
  }
}

bool GenerateCall::WaitForOutput(absl::Duration timeout) {
  return WaitUntil([](const GenerateResult& r) { return r.output_chunks > 0; }, timeout);
}

void GenerateCall::Cancel() { context_.TryCancel(); }

GenerateResult GenerateCall::Wait(absl::Duration timeout) {
  if (!WaitUntil([](const GenerateResult& r) { return r.done; }, timeout)) Cancel();
  if (thread_.joinable()) thread_.join();
  return Snapshot();
}

GenerateResult GenerateCall::Snapshot() {
  absl::MutexLock lock(&mu_);
  return result_;
}

}  // namespace omnistage
