#include "orchestrator/routing/testing/fake_replica_client.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace omnistage {

FakeReplicaClient::FakeReplicaClient(std::string name, std::vector<std::string>* log)
    : name_(std::move(name)), log_(log) {
  google::protobuf::Value ok;
  ok.set_string_value("ok");
  utility_result_ = ok;
}

absl::Status FakeReplicaClient::Add(v1::AddRequest* request) {
  log_->push_back(
      absl::StrCat(name_, ".add ", request->request_id(), command_status_.ok() ? "" : " failed"));
  if (command_status_.ok()) adds_.push_back(std::move(*request));
  return command_status_;
}

absl::Status FakeReplicaClient::AppendInput(v1::AppendInput input) {
  log_->push_back(absl::StrCat(name_, ".append ", input.request_id(), input.last() ? " last" : "",
                               command_status_.ok() ? "" : " failed"));
  if (command_status_.ok()) appends_.push_back(std::move(input));
  return command_status_;
}

absl::Status FakeReplicaClient::SetPlaybackDeadlines(v1::PlaybackDeadlines deadlines) {
  log_->push_back(absl::StrCat(name_, ".deadlines ", deadlines.deadlines_size(),
                               command_status_.ok() ? "" : " failed"));
  if (command_status_.ok()) deadlines_.push_back(std::move(deadlines));
  return command_status_;
}

void FakeReplicaClient::CallUtility(
    const std::string& name, const google::protobuf::ListValue& args,
    std::function<void(absl::StatusOr<google::protobuf::Value>)> done) {
  log_->push_back(absl::StrCat(name_, ".utility ", name));
  done(utility_result_);
}

void FakeReplicaClient::Abort(const std::vector<std::string>& ids, absl::Time call_deadline,
                              AbortDone done) {
  log_->push_back(absl::StrCat(name_, ".abort [", absl::StrJoin(ids, ","), "]"));
  aborts_.push_back(ids);
  abort_deadlines_.push_back(call_deadline);
  if (hold_aborts_) {
    held_.emplace_back(ids, std::move(done));
    return;
  }
  done(AbortAnswer(ids, abort_status_));
}

absl::StatusOr<std::vector<std::string>> FakeReplicaClient::AbortAnswer(
    const std::vector<std::string>& ids, const absl::Status& status) const {
  if (!status.ok()) return status;
  std::vector<std::string> stopped;
  for (const std::string& id : ids) {
    if (std::find(ended_.begin(), ended_.end(), id) == ended_.end()) stopped.push_back(id);
  }
  return stopped;
}

bool FakeReplicaClient::CompleteAbort(absl::Status status) {
  if (held_.empty()) return false;
  auto [ids, done] = std::move(held_.front());
  held_.pop_front();
  done(AbortAnswer(ids, status));
  return true;
}

}  // namespace omnistage
