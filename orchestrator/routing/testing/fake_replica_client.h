// FakeReplicaClient: a ReplicaClient that records every call and is driven by hand.
//
//   std::vector<std::string> log;
//   FakeReplicaClient a("A", &log);
//   a.FailAborts(absl::UnavailableError("down"));     // the next Abort calls fail
//   pool.Abort({"x"}, deadline, ...);                 // log: "A.abort [x]"
//   a.set_hold_aborts(true);                          // later aborts wait for
//   a.CompleteAbort(absl::OkStatus());                //   an explicit completion
#ifndef OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_FAKE_REPLICA_CLIENT_H_
#define OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_FAKE_REPLICA_CLIENT_H_

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "orchestrator/routing/replica_client.h"

namespace omnistage {

class FakeReplicaClient : public ReplicaClient {
 public:
  // Calls are appended to `log` (shared between fakes to see the global order).
  FakeReplicaClient(std::string name, std::vector<std::string>* log);

  absl::Status Add(v1::AddRequest* request) override;
  absl::Status AppendInput(v1::AppendInput input) override;
  absl::Status SetPlaybackDeadlines(v1::PlaybackDeadlines deadlines) override;
  void CallUtility(const std::string& name, const google::protobuf::ListValue& args,
                   std::function<void(absl::StatusOr<google::protobuf::Value>)> done) override;
  void Abort(const std::vector<std::string>& ids, absl::Time call_deadline,
             AbortDone done) override;

  // Add and AppendInput return `status` from now on (OK by default); failed ones
  // are logged with " failed" and not recorded.
  void FailCommands(absl::Status status) { command_status_ = std::move(status); }
  // Every Abort call from now on completes with `status` (OK by default).
  void FailAborts(absl::Status status) { abort_status_ = std::move(status); }
  // A successful Abort reports these ids as already ended (not stopped: not
  // live on the worker any more); every other id it carried as stopped.
  void set_ended_before_abort(std::vector<std::string> ids) { ended_ = std::move(ids); }
  // While held, Abort calls wait for CompleteAbort().
  void set_hold_aborts(bool hold) { hold_aborts_ = hold; }
  // Completes the oldest held Abort with `status`; false if none is held.
  bool CompleteAbort(absl::Status status);
  size_t held_aborts() const { return held_.size(); }
  // Utility calls answer with this (default: the string "ok").
  void set_utility_result(absl::StatusOr<google::protobuf::Value> result) {
    utility_result_ = std::move(result);
  }

  const std::string& name() const { return name_; }
  const std::vector<v1::AddRequest>& adds() const { return adds_; }
  const std::vector<v1::AppendInput>& appends() const { return appends_; }
  const std::vector<v1::PlaybackDeadlines>& deadlines() const { return deadlines_; }
  const std::vector<std::vector<std::string>>& aborts() const { return aborts_; }
  // The deadline of each Abort call, in order.
  const std::vector<absl::Time>& abort_deadlines() const { return abort_deadlines_; }

 private:
  const std::string name_;
  std::vector<std::string>* const log_;
  std::vector<v1::AddRequest> adds_;
  std::vector<v1::AppendInput> appends_;
  std::vector<v1::PlaybackDeadlines> deadlines_;
  std::vector<std::vector<std::string>> aborts_;
  std::vector<absl::Time> abort_deadlines_;
  absl::Status abort_status_;
  // What a call carrying `ids` answers with `status`.
  absl::StatusOr<std::vector<std::string>> AbortAnswer(const std::vector<std::string>& ids,
                                                       const absl::Status& status) const;
  absl::Status command_status_;
  bool hold_aborts_ = false;
  // Held calls: their ids and answer.
  std::deque<std::pair<std::vector<std::string>, AbortDone>> held_;
  std::vector<std::string> ended_;
  absl::StatusOr<google::protobuf::Value> utility_result_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_ROUTING_TESTING_FAKE_REPLICA_CLIENT_H_
