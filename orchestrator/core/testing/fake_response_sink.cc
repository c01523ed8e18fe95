#include "orchestrator/core/testing/fake_response_sink.h"

#include <utility>

namespace omnistage {

void FakeResponseSink::Send(const std::string& request_id, std::vector<v1::OutputChunk> chunks) {
  absl::MutexLock lock(&mu_);
  ++send_calls_;
  if (!terminals_.empty() || !fails_.empty()) ++sends_after_end_;
  for (v1::OutputChunk& chunk : chunks) chunks_.emplace_back(request_id, std::move(chunk));
}

void FakeResponseSink::Finish(const std::string& request_id, v1::Terminal terminal) {
  absl::MutexLock lock(&mu_);
  terminals_.emplace_back(request_id, std::move(terminal));
}

void FakeResponseSink::Started(const std::string& request_id) {
  absl::MutexLock lock(&mu_);
  started_.push_back(request_id);
}

std::vector<std::string> FakeResponseSink::started() const {
  absl::MutexLock lock(&mu_);
  return started_;
}

void FakeResponseSink::Fail(const absl::Status& status) {
  absl::MutexLock lock(&mu_);
  fails_.push_back(status);
}

std::vector<v1::OutputChunk> FakeResponseSink::chunks(const std::string& request_id) const {
  absl::MutexLock lock(&mu_);
  std::vector<v1::OutputChunk> out;
  for (const auto& [id, chunk] : chunks_) {
    if (id == request_id) out.push_back(chunk);
  }
  return out;
}

std::string FakeResponseSink::Text(const std::string& request_id) const {
  std::string text;
  for (const v1::OutputChunk& chunk : chunks(request_id)) {
    if (chunk.payload().has_text()) text += chunk.payload().text().text();
  }
  return text;
}

int FakeResponseSink::send_calls() const {
  absl::MutexLock lock(&mu_);
  return send_calls_;
}

int FakeResponseSink::sends_after_end() const {
  absl::MutexLock lock(&mu_);
  return sends_after_end_;
}

std::vector<std::pair<std::string, v1::Terminal>> FakeResponseSink::terminals() const {
  absl::MutexLock lock(&mu_);
  return terminals_;
}

int FakeResponseSink::terminal_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(terminals_.size());
}

v1::Terminal FakeResponseSink::terminal() const {
  absl::MutexLock lock(&mu_);
  return terminals_.empty() ? v1::Terminal() : terminals_.front().second;
}

std::string FakeResponseSink::terminal_id() const {
  absl::MutexLock lock(&mu_);
  return terminals_.empty() ? std::string() : terminals_.front().first;
}

std::vector<absl::Status> FakeResponseSink::fails() const {
  absl::MutexLock lock(&mu_);
  return fails_;
}

int FakeResponseSink::fail_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(fails_.size());
}

absl::Status FakeResponseSink::fail_status() const {
  absl::MutexLock lock(&mu_);
  return fails_.empty() ? absl::OkStatus() : fails_.front();
}

int FakeResponseSink::end_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(terminals_.size() + fails_.size());
}

}  // namespace omnistage
