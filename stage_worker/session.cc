#include "stage_worker/session.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {

Session::Session(uint64_t number, EventTransport* transport, uint64_t first_seq)
    : number_(number), id_(absl::StrCat(number)), transport_(transport), last_seq_(first_seq) {}

void Session::Send(v1::WorkerEvent event) {
  const v1::WorkerEvent* start = nullptr;
  bool cancel = false;
  {
    absl::MutexLock lock(&mu_);
    if (ending_) return;
    if (!writing_) {
      in_flight_ = std::move(event);
      writing_ = true;
      start = &in_flight_;
    } else if (queued_.size() >= kMaxQueuedEvents) {
      // The client stopped reading. Closing the stream aborts its requests.
      ending_ = true;
      end_status_ = absl::ResourceExhaustedError(absl::StrCat(
          "session ", id_, ": client is not reading; ", queued_.size(), " events queued"));
      queued_.clear();
      // A write is in flight and will not complete while the client does not
      // read: cancel the stream rather than wait for it. Until the cancel is
      // issued the stream must not finish (the transport would be gone).
      cancel = true;
      cancelling_ = true;
    } else {
      queued_.push_back(std::move(event));
    }
  }
  if (start != nullptr) transport_->BeginWrite(start);
  if (!cancel) return;
  transport_->CancelStream();
  bool finish;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    cancelling_ = false;
    finish = TakeFinishLocked();
    status = end_status_;
  }
  if (finish) transport_->FinishStream(status);
}

void Session::OnWriteDone(bool ok) {
  const v1::WorkerEvent* start = nullptr;
  bool finish = false;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {
      // The stream is broken: nothing more can be written.
      queued_.clear();
      if (!ending_) {
        ending_ = true;
        end_status_ = absl::CancelledError("stream broken");
      }
    }
    if (!queued_.empty()) {
      in_flight_ = std::move(queued_.front());
      queued_.pop_front();
      writing_ = true;
      start = &in_flight_;
    } else {
      finish = TakeFinishLocked();
      status = end_status_;
    }
  }
  if (start != nullptr) transport_->BeginWrite(start);
  if (finish) transport_->FinishStream(status);
}

void Session::End(const absl::Status& status) {
  bool finish;
  absl::Status final_status;
  {
    absl::MutexLock lock(&mu_);
    if (!ending_) {
      ending_ = true;
      end_status_ = status;
    }
    finish = TakeFinishLocked();
    final_status = end_status_;
  }
  if (finish) transport_->FinishStream(final_status);
}

bool Session::TakeFinishLocked() {
  if (!ending_ || writing_ || cancelling_ || finished_) return false;
  finished_ = true;
  return true;
}

bool Session::AddLive(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  return live_.insert(request_id).second;
}

void Session::EraseLive(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  live_.erase(request_id);
}

std::vector<std::string> Session::TakeLive(const std::vector<std::string>& ids) {
  std::vector<std::string> taken;
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    if (live_.erase(id) > 0) taken.push_back(id);
  }
  return taken;
}

std::vector<std::string> Session::Close(std::vector<CoreMessage>* released) {
  absl::MutexLock lock(&mu_);
  if (closed_) return {};
  closed_ = true;
  std::vector<std::string> ids(live_.begin(), live_.end());
  live_.clear();
  // The close aborts everything; fenced aborts need not wait any more.
  for (auto& [seq, message] : fenced_) released->push_back(std::move(message));
  fenced_.clear();
  return ids;
}

bool Session::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

size_t Session::live_count() const {
  absl::MutexLock lock(&mu_);
  return live_.size();
}

absl::Status Session::Sequence(uint64_t seq, std::optional<CoreMessage> command,
                              const Submit& submit) {
  absl::MutexLock lock(&mu_);
  if (seq <= last_seq_) {
    return absl::InvalidArgumentError(
        absl::StrCat("command seq ", seq, " does not increase (last was ", last_seq_, ")"));
  }
  last_seq_ = seq;
  std::vector<CoreMessage> batch;
  if (command.has_value()) batch.push_back(*std::move(command));
  auto end = fenced_.upper_bound(seq);
  for (auto it = fenced_.begin(); it != end; ++it) batch.push_back(std::move(it->second));
  fenced_.erase(fenced_.begin(), end);
  if (!batch.empty()) submit(std::move(batch));
  return absl::OkStatus();
}

void Session::Fence(uint64_t after_seq, CoreMessage abort, const Submit& submit) {
  absl::MutexLock lock(&mu_);
  if (closed_ || after_seq <= last_seq_) {
    std::vector<CoreMessage> batch;
    batch.push_back(std::move(abort));
    submit(std::move(batch));
    return;
  }
  fenced_.emplace(after_seq, std::move(abort));
}

}  // namespace omnistage
