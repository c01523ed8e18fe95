// CoreFixture: a PipelineCore over FakeReplicaClients on a ManualScheduler, as
// the fuzz targets drive it.
//
//   CoreFixture fixture(*ParsePipelineConfig(kYaml));   // every replica ready
//   auto sink = std::make_shared<CheckingSink>("#0");
//   fixture.Generate(request, sink);
//   fixture.core().OnStepOutputs(0, 0, outputs);
//   fixture.AdvanceClock(absl::Seconds(1));
//
// With `hold_aborts`, every worker Abort call waits until AnswerAbort() (or
// its deadline: AdvanceClock fails it then, as ReplicaSession does); else the
// fakes answer OK at once.
//
// The client-facing calls (Generate, Cancel, Abort) go through this class and
// only through it, so that a change of their signatures (a caller identity,
// say) is one change here. Everything runs on the thread that made it.
#ifndef OMNISTAGE_FUZZ_CORE_FIXTURE_H_
#define OMNISTAGE_FUZZ_CORE_FIXTURE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/testing/manual_scheduler.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/response_sink.h"
#include "orchestrator/routing/testing/fake_replica_client.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {
namespace fuzz {

class CoreFixture {
 public:
  // Every replica of `config` (addresses: one fake each) is made ready as
  // instance "<stage>.<replica>#1", of `capacity` (its batch slots, which the
  // admission queue counts), its engine resuming by `resume` (failover).
  explicit CoreFixture(PipelineConfig config, bool hold_aborts = false, int capacity = 8,
                       v1::ResumeMode resume = v1::RESUME_MODE_UNSPECIFIED);

  PipelineCore& core() { return *core_; }
  ManualScheduler& scheduler() { return scheduler_; }
  FakeReplicaClient& replica(int stage, int replica) { return *fakes_[stage][replica]; }
  int stages() const { return static_cast<int>(fakes_.size()); }
  int replicas(int stage) const { return static_cast<int>(fakes_[stage].size()); }
  // Every call made to the fakes, in order ("0.1.add r1", "2.0.abort [a,b]").
  const std::vector<std::string>& log() const { return log_; }

  // `streamed_input`: a GenerateDuplex request (AppendInput feeds it).
  void Generate(v1::GenerateRequest request, std::shared_ptr<ResponseSink> sink,
                std::string caller = "", bool streamed_input = false);
  void Cancel(const std::string& request_id, const ResponseSink* sink);
  void Abort(const v1::AbortRequest& request, absl::Time deadline,
             std::function<void(absl::StatusOr<v1::AbortResponse>)> done,
             const std::string& caller = "");

  // Answers the replica's oldest waiting Abort call with `status` (the fakes
  // answer in order); false if none waits. `on_answer` hears of it first.
  bool AnswerAbort(int stage, int replica, const absl::Status& status);
  void set_on_answer(std::function<void(int stage, int replica, const absl::Status&)> on_answer) {
    on_answer_ = std::move(on_answer);
  }
  // Moves the clock; then waiting Abort calls past their deadline fail.
  void AdvanceClock(absl::Duration delay);
  // Abort calls waiting, over all replicas.
  size_t held_aborts() const;

 private:
  // First: the core cancels its timers on it when it goes.
  ManualScheduler scheduler_;
  std::vector<std::string> log_;
  std::vector<std::vector<std::unique_ptr<FakeReplicaClient>>> fakes_;
  std::unique_ptr<PipelineCore> core_;
  std::function<void(int, int, const absl::Status&)> on_answer_ = [](int, int,
                                                                     const absl::Status&) {};
};

// The instance id of incarnation `n` of a replica: "<stage>.<replica>#<n>".
std::string InstanceId(int stage, int replica, int n);

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_CORE_FIXTURE_H_
