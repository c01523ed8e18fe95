#include "fuzz/core_fixture.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace fuzz {

std::string InstanceId(int stage, int replica, int n) {
  return absl::StrCat(stage, ".", replica, "#", n);
}

CoreFixture::CoreFixture(PipelineConfig config, bool hold_aborts, int capacity,
                         v1::ResumeMode resume) {
  std::vector<std::vector<ReplicaClient*>> replicas(config.stages.size());
  for (size_t s = 0; s < config.stages.size(); ++s) {
    fakes_.emplace_back();
    for (int r = 0; r < config.stages[s].replica_count(); ++r) {
      fakes_[s].push_back(std::make_unique<FakeReplicaClient>(absl::StrCat(s, ".", r), &log_));
      fakes_[s].back()->set_hold_aborts(hold_aborts);
      replicas[s].push_back(fakes_[s].back().get());
    }
  }
  core_ = std::make_unique<PipelineCore>(std::move(config), std::move(replicas), &scheduler_);
  for (int s = 0; s < stages(); ++s) {
    for (int r = 0; r < this->replicas(s); ++r) {
      v1::Ready ready;
      ready.set_stage_id(s);
      ready.set_instance_id(InstanceId(s, r, 1));
      ready.set_capacity(capacity);
      ready.set_resume(resume);
      core_->OnReplicaReady(s, r, ready);
    }
  }
}

void CoreFixture::Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink,
                           std::string caller, bool streamed_input) {
  Caller who;
  who.identity = std::move(caller);
  core_->Generate(std::move(request), std::move(sink), "", who, streamed_input);
}

void CoreFixture::Cancel(const std::string& request_id, const ResponseSink* sink) {
  core_->Cancel(request_id, sink);
}

void CoreFixture::Abort(const v1::AbortRequest& request, absl::Time deadline,
                        std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
                        const std::string& caller) {
  // A user's Abort: only its own requests (an admin's is tested elsewhere).
  omnistage::Caller who;
  who.identity = caller;
  core_->Abort(request, deadline, std::move(done), who);
}

bool CoreFixture::AnswerAbort(int stage, int replica, const absl::Status& status) {
  FakeReplicaClient& fake = *fakes_[stage][replica];
  if (fake.held_aborts() == 0) return false;
  on_answer_(stage, replica, status);
  return fake.CompleteAbort(status);
}

void CoreFixture::AdvanceClock(absl::Duration delay) {
  scheduler_.AdvanceBy(delay);
  for (int s = 0; s < stages(); ++s) {
    for (int r = 0; r < replicas(s); ++r) {
      FakeReplicaClient& fake = *fakes_[s][r];
      while (fake.held_aborts() > 0 &&
             fake.abort_deadlines()[fake.aborts().size() - fake.held_aborts()] <=
                 scheduler_.Now()) {
        AnswerAbort(s, r, absl::DeadlineExceededError("worker Abort deadline passed"));
      }
    }
  }
}

size_t CoreFixture::held_aborts() const {
  size_t held = 0;
  for (const auto& stage : fakes_) {
    for (const auto& fake : stage) held += fake->held_aborts();
  }
  return held;
}

}  // namespace fuzz
}  // namespace omnistage
