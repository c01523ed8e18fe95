#include "stage_worker/testing/worker_test_client.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "common/error_proto.h"

namespace omnistage {

WorkerTestClient::WorkerTestClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(v1::StageWorker::NewStub(std::move(channel))) {}

WorkerTestClient::~WorkerTestClient() {
  context_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

absl::StatusOr<v1::Ready> WorkerTestClient::Connect(v1::Hello hello) {
  stream_ = stub_->Connect(&context_);
  reader_ = std::thread([this] { ReadLoop(); });
  v1::WorkerCommand command;
  *command.mutable_hello() = std::move(hello);
  Send(std::move(command));
  std::optional<v1::WorkerEvent> first = Next(absl::Seconds(10));
  if (!first.has_value()) {
    std::optional<grpc::Status> end = WaitForEnd(absl::Seconds(10));
    if (!end.has_value()) return absl::DeadlineExceededError("no Ready within 10 s");
    return absl::Status(static_cast<absl::StatusCode>(end->error_code()), end->error_message());
  }
  if (first->has_rejected() && first->rejected().command() == v1::CommandRejected::KIND_HELLO) {
    return StatusFromErrorProto(first->rejected().error());
  }
  if (!first->has_ready()) return absl::InternalError("first event is not Ready");
  session_id_ = first->ready().session_id();
  return first->ready();
}

uint64_t WorkerTestClient::Send(v1::WorkerCommand command) {
  if (command.seq() == 0) command.set_seq(seq_ + 1);
  const uint64_t seq = command.seq();
  seq_ = std::max(seq_, seq);
  stream_->Write(command);
  return seq;
}

uint64_t WorkerTestClient::SendBatch(std::vector<v1::WorkerCommand> commands) {
  v1::WorkerCommand batch;
  for (v1::WorkerCommand& command : commands) {
    command.set_seq(++seq_);
    *batch.mutable_batch()->add_commands() = std::move(command);
  }
  stream_->Write(batch);
  return seq_;
}

uint64_t WorkerTestClient::Add(const std::string& id, const std::string& text,
                               uint32_t max_tokens, bool input_complete) {
  v1::WorkerCommand command;
  v1::AddRequest* add = command.mutable_add();
  add->set_request_id(id);
  add->add_input()->mutable_text()->set_text(text);
  add->set_input_complete(input_complete);
  add->mutable_params()->set_max_tokens(max_tokens);
  return Send(std::move(command));
}

absl::StatusOr<std::vector<std::string>> WorkerTestClient::Abort(
    const std::vector<std::string>& ids) {
  v1::WorkerAbortRequest request;
  request.set_session_id(session_id_);
  request.set_after_seq(seq_);
  for (const std::string& id : ids) request.add_request_ids(id);
  v1::WorkerAbortResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status status = stub_->Abort(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }
  return std::vector<std::string>(response.aborted_ids().begin(), response.aborted_ids().end());
}

void WorkerTestClient::CloseWrites() {
  if (!writes_closed_) stream_->WritesDone();
  writes_closed_ = true;
}

void WorkerTestClient::Cancel() { context_.TryCancel(); }

void WorkerTestClient::ReadLoop() {
  v1::WorkerEvent event;
  while (stream_->Read(&event)) {
    absl::MutexLock lock(&mu_);
    events_.push_back(std::move(event));
    event.Clear();
  }
  grpc::Status status = stream_->Finish();
  absl::MutexLock lock(&mu_);
  end_ = status;
}

std::optional<v1::WorkerEvent> WorkerTestClient::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return !events_.empty() || end_.has_value();
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (events_.empty()) return std::nullopt;
  v1::WorkerEvent event = std::move(events_.front());
  events_.pop_front();
  return event;
}

std::vector<v1::RequestOutput> WorkerTestClient::CollectUntilFinished(const std::string& id,
                                                                      absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<v1::RequestOutput> outputs;
  std::deque<v1::WorkerEvent> others;
  while (true) {
    std::optional<v1::WorkerEvent> event = Next(deadline - absl::Now());
    if (!event.has_value()) {
      outputs.clear();
      break;
    }
    bool finished = false;
    bool mine = false;
    if (event->has_step()) {
      for (const v1::RequestOutput& output : event->step().outputs()) {
        if (output.request_id() != id) continue;
        mine = true;
        outputs.push_back(output);
        finished = finished || output.finished();
      }
    }
    if (!mine) others.push_back(std::move(*event));
    if (finished) break;
  }
  absl::MutexLock lock(&mu_);
  events_.insert(events_.begin(), others.begin(), others.end());
  return outputs;
}

std::optional<v1::WorkerEvent> WorkerTestClient::NextWhere(
    const std::function<bool(const v1::WorkerEvent&)>& match, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::optional<v1::WorkerEvent> event = Next(deadline - absl::Now());
    if (!event.has_value()) break;
    if (match(*event)) return event;
  }
  return std::nullopt;
}

std::vector<v1::WorkerEvent> WorkerTestClient::EventsUntilEnd(absl::Duration timeout,
                                                              absl::Duration quiet) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<v1::WorkerEvent> events;
  while (absl::Now() < deadline) {
    std::optional<v1::WorkerEvent> event = Next(std::min(quiet, deadline - absl::Now()));
    if (!event.has_value()) break;
    events.push_back(*std::move(event));
  }
  return events;
}

std::optional<grpc::Status> WorkerTestClient::WaitForEnd(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return end_.has_value(); };
  mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  return end_;
}

}  // namespace omnistage
