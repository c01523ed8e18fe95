// Shared set-up for the PipelineCore tests: a thinker (text, final) -> talker
// (codes) -> vocoder (audio, final) pipeline over FakeReplicaClients that share one
// call log ("T0.add r1", "K1.append r1 last", "W0.abort [a,b]"), a recording
// FakeResponseSink per Generate, and the end-of-test invariant check (run by
// TearDown for every test unless it calls LeaveOpen). The core
// runs on a ManualScheduler: everything happens on the test thread, and timers
// fire only when a test moves the clock (scheduler_.AdvanceBy).
#ifndef OMNISTAGE_ORCHESTRATOR_CORE_TESTING_PIPELINE_CORE_HARNESS_H_
#define OMNISTAGE_ORCHESTRATOR_CORE_TESTING_PIPELINE_CORE_HARNESS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/testing/manual_scheduler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/config/pipeline_config.h"
#include "orchestrator/core/pipeline_core.h"
#include "orchestrator/core/testing/fake_response_sink.h"
#include "orchestrator/routing/testing/fake_replica_client.h"

namespace omnistage {
namespace pipeline_core_test {

struct Shape {
  int thinkers = 1;
  int talkers = 1;
  int vocoders = 1;
  InputMode talker_input = InputMode::kStreaming;
  InputMode vocoder_input = InputMode::kStreaming;

  // Shape().Thinkers(2).Talkers(2): named settings in C++17.
  Shape& Thinkers(int n) {
    thinkers = n;
    return *this;
  }
  Shape& Talkers(int n) {
    talkers = n;
    return *this;
  }
  Shape& Vocoders(int n) {
    vocoders = n;
    return *this;
  }
  Shape& TalkerInput(InputMode mode) {
    talker_input = mode;
    return *this;
  }
  Shape& VocoderInput(InputMode mode) {
    vocoder_input = mode;
    return *this;
  }
};

inline v1::Payload Text(const std::string& text) {
  v1::Payload p;
  p.mutable_text()->set_text(text);
  return p;
}
inline v1::Payload Codes(std::vector<int32_t> ids) {
  v1::Payload p;
  for (int32_t id : ids) p.mutable_tokens()->add_ids(id);
  return p;
}
inline v1::Payload Audio(const std::string& pcm) {
  v1::Payload p;
  p.mutable_audio()->set_pcm_s16le(pcm);
  p.mutable_audio()->set_sample_rate_hz(24000);
  p.mutable_audio()->set_channels(1);
  return p;
}

inline StageConfig Stage(int id, const std::string& name, v1::Modality modality, bool final_output,
                         InputMode input, int replicas) {
  StageConfig stage;
  stage.id = id;
  stage.name = name;
  stage.engine = absl::StrCat("sim_", name);
  for (int r = 0; r < replicas; ++r) stage.addresses.push_back(absl::StrCat(name, r, ":50051"));
  stage.final_output = final_output;
  stage.output_modality = modality;
  stage.input_mode = input;
  stage.defaults.set_stage_id(id);
  return stage;
}

inline PipelineConfig OmniConfig(const Shape& shape) {
  PipelineConfig config;
  config.name = "omni-test";
  config.stages.push_back(
      Stage(0, "thinker", v1::MODALITY_TEXT, true, InputMode::kOnFinish, shape.thinkers));
  config.stages.push_back(
      Stage(1, "talker", v1::MODALITY_TOKENS, false, shape.talker_input, shape.talkers));
  config.stages.push_back(
      Stage(2, "vocoder", v1::MODALITY_AUDIO, true, shape.vocoder_input, shape.vocoders));
  config.max_prompt_bytes = 32;
  config.max_in_flight = 100;
  return config;
}

class PipelineCoreTest : public ::testing::Test {
 protected:
  static constexpr const char* kPrefix[] = {"T", "K", "W"};

  // Creates the core over fresh fakes; every replica is made ready as "<T0>#1".
  void Build(PipelineConfig config) {
    core_.reset();
    fakes_.clear();
    std::vector<std::vector<ReplicaClient*>> replicas;
    for (size_t s = 0; s < config.stages.size(); ++s) {
      fakes_.emplace_back();
      replicas.emplace_back();
      for (int r = 0; r < config.stages[s].replica_count(); ++r) {
        fakes_[s].push_back(std::make_unique<FakeReplicaClient>(absl::StrCat(Prefix(s), r), &log_));
        replicas[s].push_back(fakes_[s].back().get());
      }
    }
    core_ = std::make_unique<PipelineCore>(std::move(config), std::move(replicas), &scheduler_);
    for (size_t s = 0; s < fakes_.size(); ++s) {
      for (size_t r = 0; r < fakes_[s].size(); ++r) Ready(s, r, "#1");
    }
  }
  void Build(const Shape& shape = Shape()) { Build(OmniConfig(shape)); }

  static std::string Prefix(size_t stage) { return stage < 3 ? kPrefix[stage] : "S"; }

  // Instance ids are "<T0><suffix>", e.g. "K1#2".
  void Ready(int stage, int replica, const std::string& suffix) {
    v1::Ready ready;
    ready.set_stage_id(stage);
    ready.set_instance_id(absl::StrCat(Prefix(stage), replica, suffix));
    ready.set_capacity(8);
    ready.set_resume(resume_);
    ready.set_playback_deadlines(playback_deadlines_);
    core_->OnReplicaReady(stage, replica, ready);
  }

  PipelineCore& core() { return *core_; }
  FakeReplicaClient& fake(int stage, int replica) { return *fakes_[stage][replica]; }

  // `caller`: the authenticated identity the request is started by.
  std::shared_ptr<FakeResponseSink> Gen(v1::GenerateRequest request,
                                        const std::string& caller = "") {
    auto sink = std::make_shared<FakeResponseSink>();
    sinks_.push_back(sink);
    Caller who;
    who.identity = caller;
    core_->Generate(std::move(request), sink, "", who);
    return sink;
  }
  std::shared_ptr<FakeResponseSink> Gen(const std::string& id,
                                        std::vector<v1::Modality> modalities = {},
                                        const std::string& caller = "") {
    v1::GenerateRequest request;
    request.set_request_id(id);
    request.set_prompt("Hi there");
    for (v1::Modality m : modalities) request.add_output_modalities(m);
    return Gen(std::move(request), caller);
  }

  // One worker step of `stage`/`replica` carrying one output for `id`.
  void Out(int stage, int replica, const std::string& id, std::vector<v1::Payload> payloads,
           bool finished = false, v1::FinishReason reason = v1::FINISH_REASON_STOP) {
    v1::StepOutputs step;
    v1::RequestOutput* output = step.add_outputs();
    output->set_request_id(id);
    for (v1::Payload& p : payloads) *output->add_payloads() = std::move(p);
    output->set_finished(finished);
    if (finished) output->set_finish_reason(reason);
    core_->OnStepOutputs(stage, replica, step);
  }
  void Done(int stage, int replica, const std::string& id, std::vector<v1::Payload> payloads = {}) {
    Out(stage, replica, id, std::move(payloads), /*finished=*/true);
  }

  // Log entries containing `part`, in order.
  std::vector<std::string> LogWith(const std::string& part) const {
    std::vector<std::string> out;
    for (const std::string& line : log_) {
      if (absl::StrContains(line, part)) out.push_back(line);
    }
    return out;
  }
  void ClearLog() { log_.clear(); }

  // Runs core.Abort and returns what its callback got (it must run synchronously
  // unless `held`).
  absl::StatusOr<v1::AbortResponse> AbortNow(std::vector<std::string> ids,
                                             const std::string& identity = "",
                                             bool abort_any = false) {
    Caller caller;
    caller.identity = identity;
    caller.abort_any = abort_any;
    v1::AbortRequest request;
    for (std::string& id : ids) request.add_request_ids(std::move(id));
    absl::StatusOr<v1::AbortResponse> result = absl::UnknownError("Abort never answered");
    int calls = 0;
    core_->Abort(
        request, absl::InfiniteFuture(),
        [&](absl::StatusOr<v1::AbortResponse> r) {
          ++calls;
          result = std::move(r);
        },
        caller);
    EXPECT_EQ(calls, 1) << "Abort's callback must run exactly once";
    return result;
  }

  // Every test ends with ExpectAllEnded() (TearDown) unless it says why not.
  void TearDown() override {
    if (core_ != nullptr && leave_open_.empty()) ExpectAllEnded();
  }
  // Skips the end-of-test check: the test means to leave something in flight.
  void LeaveOpen(const std::string& why) { leave_open_ = why; }

  // The invariants every test ends with: each Generate ended exactly once (one
  // terminal or one Fail, never both, nothing sent after it), nothing is in
  // flight, and no pool holds a binding.
  void ExpectAllEnded() {
    for (size_t i = 0; i < sinks_.size(); ++i) {
      EXPECT_EQ(sinks_[i]->end_count(), 1)
          << "Generate #" << i << ": " << sinks_[i]->terminal_count() << " terminal(s), "
          << sinks_[i]->fail_count() << " Fail(s)";
      EXPECT_EQ(sinks_[i]->sends_after_end(), 0) << "Generate #" << i;
    }
    EXPECT_EQ(core_->in_flight(), 0u);
    for (size_t s = 0; s < fakes_.size(); ++s) {
      EXPECT_EQ(core_->pool(s).bindings(), 0u) << "stage " << s;
    }
  }

  // Declared first: the core cancels its timers here when it goes.
  ManualScheduler scheduler_;
  std::vector<std::string> log_;
  std::vector<std::vector<std::unique_ptr<FakeReplicaClient>>> fakes_;
  std::unique_ptr<PipelineCore> core_;
  std::vector<std::shared_ptr<FakeResponseSink>> sinks_;
  std::string leave_open_;
  // How every replica made ready says its engine resumes (failover).
  v1::ResumeMode resume_ = v1::RESUME_MODE_UNSPECIFIED;
  // Whether every replica made ready takes playback deadlines.
  bool playback_deadlines_ = false;
};

// The text of an ABORT terminal's partial output.
inline std::string PartialText(const v1::Terminal& t) {
  std::string text;
  for (const v1::OutputChunk& c : t.partial_output()) {
    if (c.payload().has_text()) text += c.payload().text().text();
  }
  return text;
}

}  // namespace pipeline_core_test
}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_CORE_TESTING_PIPELINE_CORE_HARNESS_H_
