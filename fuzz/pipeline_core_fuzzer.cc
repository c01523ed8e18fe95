// Fuzz target, stateful: the orchestrator's core (PipelineCore) driven through
// random sequences of what clients, workers and time can do, with the
// lifecycle's invariants checked after every step (fuzz/core_checker.h).
//
// Input: one byte choosing the pipeline (1 to 3 stages, 1 or 2 replicas each,
// input modes, idle timeout), then operations, each an opcode byte and its
// arguments (fuzz/fuzz_input.h reads a short input as zeros):
//   generate, step outputs (text, tokens, audio; finished or not, any reason),
//   client cancel (its own or another call's), client Abort (several ids, each
//   with a deadline of its own, some already past), replica down (its
//   pending aborts failed or not), replica ready (same or new incarnation),
//   stalled, draining, a command rejected, a worker Abort call completed (OK
//   or failed), the clock moved (worker Abort calls past their deadline fail as
//   the real session fails them), sends failing, drain, status and utilities.
// Every worker Abort call waits until an operation completes it. After the
// last operation everything is settled (aborts answered, the clock moved on,
// a drain) and the target checks that every request ended exactly once and
// nothing is left behind.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "fuzz/checking_sink.h"
#include "fuzz/core_checker.h"
#include "fuzz/core_fixture.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "orchestrator/config/pipeline_config.h"

namespace omnistage {
namespace fuzz {
namespace {

constexpr absl::Duration kWorkerAbortTimeout = absl::Seconds(2);

// Batch slots of every replica: few, so that the admission queue fills.
constexpr int kCapacity = 2;

// Stages text (final) -> tokens -> audio (final), as many as asked. The first
// byte is the number of stages and, from 3 on, whether callers have
// identities (`*identities`: then Generate and Abort read one more byte, who
// calls; inputs from before identities start with 0 to 2 and read as then),
// and from 6 on, whether every stage fails over (`*failover`: then a replica
// that comes up reads one more byte, how its engine resumes; inputs from
// before failover start below 6), and from 12 on, whether every stage picks
// by prefix (`*routing`: a tiny approximate index, so that it is capped and
// ages; Generate reads one more byte, its session key and prompt).
PipelineConfig Pipeline(FuzzInput& in, bool* identities, bool* failover, bool* routing) {
  PipelineConfig config;
  config.name = "fuzz";
  const uint8_t first = in.Byte();
  const int stages = 1 + first % 3;
  *identities = (first / 3) % 2 == 1;
  *failover = (first / 6) % 2 == 1;
  *routing = (first / 12) % 2 == 1;
  const v1::Modality modalities[] = {v1::MODALITY_TEXT, v1::MODALITY_TOKENS, v1::MODALITY_AUDIO};
  for (int s = 0; s < stages; ++s) {
    StageConfig stage;
    stage.id = s;
    stage.name = absl::StrCat("s", s);
    for (int r = 1 + static_cast<int>(in.Below(2)); r > 0; --r) {
      stage.addresses.push_back(absl::StrCat("s", s, "r", r, ":1"));
    }
    stage.output_modality = modalities[s];
    stage.final_output = s == 0 || s == stages - 1;
    stage.input_mode = in.Bool() ? InputMode::kStreaming : InputMode::kOnFinish;
    stage.defaults.set_stage_id(s);
    if (*failover) stage.failover_max_attempts = 2;
    if (*routing) {
      stage.pick = PickPolicy::kPrefixAware;
      stage.prefix.block_tokens = 1;
      stage.prefix.index_blocks_per_replica = 3;
      stage.prefix.index_ttl = absl::Seconds(1);
      stage.prefix.balance_threshold = 0.4;
    }
    config.stages.push_back(std::move(stage));
  }
  const absl::Duration idle[] = {absl::ZeroDuration(), absl::Milliseconds(500), absl::Seconds(30)};
  config.request_idle_timeout = idle[in.Below(3)];
  config.worker_abort_timeout = kWorkerAbortTimeout;
  config.max_in_flight = 6;
  config.max_prompt_bytes = 16;
  // Little room to keep a request's input, so that some stop failing over.
  config.max_replay_bytes = 64;
  // A small admission queue, so that requests wait, leave, are shed, expire
  // and are aborted while queued (replicas have kCapacity slots: past them,
  // new requests wait).
  config.admission_headroom = 0;
  config.max_queued = 2;
  config.max_queue_wait = absl::Seconds(1);
  return config;
}

class CoreFuzzer {
 public:
  CoreFuzzer(PipelineConfig config, bool identities, bool failover, bool routing, FuzzInput* in)
      : fixture_(std::move(config), /*hold_aborts=*/true, kCapacity,
                 failover ? v1::RESUME_MODE_REPLAY : v1::RESUME_MODE_UNSPECIFIED),
        checker_(&fixture_),
        in_(*in),
        identities_(identities),
        failover_(failover),
        routing_(routing),
        trace_(std::getenv("FUZZ_TRACE") != nullptr) {
    for (int s = 0; s < fixture_.stages(); ++s) incarnation_.emplace_back(fixture_.replicas(s), 1);
    fixture_.set_on_answer([this](int stage, int replica, const absl::Status& status) {
      checker_.WorkerAbortAnswered(stage, replica, status);
    });
  }

  void Run() {
    for (int steps = 0; !in_.empty() && steps < 2000; ++steps) {
      Step();
      checker_.CheckStep();
    }
    Settle();
    checker_.CheckSettled();
    FUZZ_CHECK(drained_ == 1, "the drain finished ", drained_, " times");
  }

 private:
  // With FUZZ_TRACE set, each operation is printed as it runs (to read a crash).
  void Trace(const std::string& what) {
    if (trace_) std::fprintf(stderr, "[%s] %s\n", absl::FormatTime(fixture_.scheduler().Now()).c_str(), what.c_str());
  }
  int Stage() { return static_cast<int>(in_.Below(fixture_.stages())); }
  // Who calls: with identities, unauthenticated ("") or one of two
  // identities; else always "" (and no byte is read).
  std::string Caller() {
    if (!identities_) return "";
    static const char* const kCallers[] = {"", "", "alice", "bob"};
    return kCallers[in_.Below(4)];
  }
  int Replica(int stage) { return static_cast<int>(in_.Below(fixture_.replicas(stage))); }
  // A known id, now and then one nobody used.
  std::string Id() {
    const std::vector<std::string>& ids = checker_.ids();
    const size_t i = in_.Below(static_cast<uint32_t>(ids.size()) + 1);
    return i < ids.size() ? ids[i] : "ghost";
  }
  // The replica `id` is bound to on `stage` most of the time, else any.
  int ReplicaFor(int stage, const std::string& id) {
    const bool prefer_bound = in_.Below(4) != 0;
    const int any = Replica(stage);
    const std::optional<int> bound = fixture_.core().pool(stage).Bound(id);
    return bound.has_value() && prefer_bound ? *bound : any;
  }
  absl::Status Failure() {
    switch (in_.Below(3)) {
      case 0:
        return absl::UnavailableError("connection reset");
      case 1:
        return absl::DeadlineExceededError("no answer");
      default:
        return absl::InternalError("worker error");
    }
  }

  void Step() {
    switch (in_.Below(14)) {
      case 0:
      case 1:
        return Generate();
      case 2:
      case 3:
        return Outputs();
      case 4:
        return Cancel();
      case 5:
        return ClientAbort();
      case 6:
        return ReplicaDown();
      case 7:
        return ReplicaReady();
      case 8:
        return ReplicaTrouble();
      case 9:
        return Rejected();
      case 10:
      case 11:
        return CompleteAbort();
      case 12:
        return AdvanceClock(in_.Pick<int>({1, 10, 50, 100, 400, 1000, 2000, 30000}));
      default:
        return Other();
    }
  }

  void Generate() {
    v1::GenerateRequest request;
    const uint32_t id = in_.Below(9);
    request.set_request_id(id < 6 ? absl::StrCat("r", id) : id == 6 ? "" : "bad id");
    request.set_prompt(in_.Below(8) == 0 ? "" : "prompt");
    if (routing_) {
      // Prompts that share a prefix or not, sessions or none.
      const uint32_t which = in_.Below(9);
      const char* prompts[] = {"prompt", "prompt, then", "another one"};
      const char* sessions[] = {"", "alice", "bob"};
      if (!request.prompt().empty()) request.set_prompt(prompts[which % 3]);
      request.set_session_key(sessions[which / 3]);
    }
    const uint32_t modality = in_.Below(5);
    if (modality > 0) request.add_output_modalities(static_cast<v1::Modality>(modality));
    std::shared_ptr<CheckingSink> sink = checker_.NewSink(request.request_id());
    sink->set_caller(Caller());
    // Now and then a GenerateDuplex request, its input fed by Input().
    const bool streamed = in_.Below(4) == 0;
    Trace(absl::StrCat(sink->label(), " by '", sink->caller(), streamed ? "' (duplex): " : "': ",
                       request.ShortDebugString()));
    fixture_.Generate(std::move(request), sink, sink->caller(), streamed);
  }

  void Outputs() {
    const int stage = Stage();
    const std::string first = Id();
    const int replica = ReplicaFor(stage, first);
    v1::StepOutputs step;
    const int outputs = 1 + static_cast<int>(in_.Below(3));
    for (int i = 0; i < outputs; ++i) {
      v1::RequestOutput* output = step.add_outputs();
      output->set_request_id(i == 0 ? first : Id());
      switch (in_.Below(4)) {
        case 0:
          break;
        case 1:
          output->add_payloads()->mutable_text()->set_text("word ");
          break;
        case 2:
          output->add_payloads()->mutable_tokens()->add_ids(7);
          break;
        default:
          output->add_payloads()->mutable_audio()->set_pcm_s16le(std::string(4, '\0'));
      }
      if (in_.Bool()) {
        output->set_finished(true);
        const v1::FinishReason reason = in_.Pick<v1::FinishReason>(
            {v1::FINISH_REASON_STOP, v1::FINISH_REASON_LENGTH, v1::FINISH_REASON_ABORT,
             v1::FINISH_REASON_ERROR});
        output->set_finish_reason(reason);
        if (reason == v1::FINISH_REASON_ERROR || reason == v1::FINISH_REASON_ABORT) {
          output->mutable_error()->set_code(reason == v1::FINISH_REASON_ERROR ? 13 : 10);
          output->mutable_error()->set_message("engine says no");
        }
      }
    }
    Trace(absl::StrCat("outputs of stage ", stage, " replica ", replica, ": ", step.ShortDebugString()));
    for (const v1::RequestOutput& output : step.outputs()) {
      if (output.finished()) checker_.WorkerFinished(stage, replica, output.request_id());
    }
    fixture_.core().OnStepOutputs(stage, replica, step);
  }

  void Cancel() {
    const std::vector<std::shared_ptr<CheckingSink>>& sinks = checker_.sinks();
    const uint32_t index = in_.Below(static_cast<uint32_t>(sinks.size()));
    // Mostly the caller's own request; sometimes an id another call owns.
    const bool own = in_.Below(4) != 0;
    const std::string other = Id();
    if (sinks.empty()) return;
    const CheckingSink* caller = sinks[index].get();
    const std::string id = own ? caller->id() : other;
    Trace(absl::StrCat("cancel ", id, " by ", caller->label()));
    fixture_.Cancel(id, caller);
  }

  void ClientAbort() {
    v1::AbortRequest request;
    for (int n = 1 + in_.Below(4); n > 0; --n) request.add_request_ids(Id());
    // A deadline no other abort has: not a whole millisecond, within the worker
    // timeout (else the timeout is the deadline), sometimes already past.
    const absl::Time now = fixture_.scheduler().Now();
    const absl::Duration unique = absl::Nanoseconds(++aborts_);
    const bool past = in_.Below(4) == 0;
    const uint32_t ms = in_.Below(2000);
    const absl::Time deadline = past ? now - absl::Milliseconds(ms % 100) - unique
                                     : now + absl::Milliseconds(ms) + unique;
    const std::string caller = Caller();
    Trace(absl::StrCat("client abort by '", caller, "' ", request.ShortDebugString(), " deadline ",
                       absl::FormatTime(deadline)));
    fixture_.Abort(request, deadline, checker_.NewAbort(request, deadline, caller), caller);
  }

  void AnswerAll(int stage, int replica, const absl::Status& status) {
    while (fixture_.AnswerAbort(stage, replica, status)) {
    }
  }

  void ReplicaDown() {
    const int stage = Stage();
    const int replica = Replica(stage);
    // The real session fails its pending Abort calls when its stream breaks,
    // before or after the core hears of it.
    const uint32_t order = in_.Below(3);
    const absl::Status gone = absl::UnavailableError("stream broke");
    Trace(absl::StrCat("replica ", stage, ".", replica, " down, order ", order));
    if (order == 1) AnswerAll(stage, replica, gone);
    fixture_.core().OnReplicaDown(stage, replica, gone);
    if (order == 2) AnswerAll(stage, replica, gone);
  }

  void ReplicaReady() {
    const int stage = Stage();
    const int replica = Replica(stage);
    if (in_.Bool()) ++incarnation_[stage][replica];
    v1::Ready ready;
    ready.set_stage_id(stage);
    ready.set_instance_id(InstanceId(stage, replica, incarnation_[stage][replica]));
    ready.set_capacity(kCapacity);
    if (failover_) {
      const v1::ResumeMode modes[] = {v1::RESUME_MODE_REPLAY, v1::RESUME_MODE_CONTINUATION,
                                      v1::RESUME_MODE_UNSPECIFIED};
      ready.set_resume(modes[in_.Below(3)]);
    }
    Trace(absl::StrCat("replica ready ", ready.instance_id()));
    fixture_.core().OnReplicaReady(stage, replica, ready);
  }

  void ReplicaTrouble() {
    const int stage = Stage();
    const int replica = Replica(stage);
    const bool stall = in_.Bool();
    const uint64_t step = 1 + in_.Below(100);
    Trace(absl::StrCat("replica ", stage, ".", replica, stall ? " stalled" : " draining"));
    if (stall) {
      v1::Stalled stalled;
      stalled.set_step(step);
      stalled.set_running_ms(5000);
      stalled.set_stall_timeout_ms(1000);
      fixture_.core().OnReplicaStalled(stage, replica, stalled);
    } else {
      v1::Draining draining;
      draining.set_drain_timeout_ms(1000);
      fixture_.core().OnReplicaDraining(stage, replica, draining);
    }
  }

  void Rejected() {
    const int stage = Stage();
    const std::string id = Id();
    v1::CommandRejected rejected;
    rejected.set_request_id(id);
    rejected.set_command(in_.Pick<v1::CommandRejected::Kind>(
        {v1::CommandRejected::KIND_ADD, v1::CommandRejected::KIND_APPEND_INPUT,
         v1::CommandRejected::KIND_UTILITY, v1::CommandRejected::KIND_HELLO}));
    rejected.mutable_error()->set_code(3);
    rejected.mutable_error()->set_message("bad parameter");
    rejected.mutable_error()->set_field("params.extra.voice");
    const int replica = ReplicaFor(stage, id);
    Trace(absl::StrCat("rejected by ", stage, ".", replica, ": ", rejected.ShortDebugString()));
    if (rejected.command() == v1::CommandRejected::KIND_ADD) {
      checker_.WorkerRefusedAdd(stage, replica, id);
    }
    fixture_.core().OnCommandRejected(stage, replica, rejected);
  }

  void CompleteAbort() {
    const int stage = Stage();
    const int replica = Replica(stage);
    const bool ok = in_.Below(3) != 0;
    const absl::Status failure = Failure();
    const absl::Status status = ok ? absl::OkStatus() : failure;
    Trace(absl::StrCat("complete an abort of ", stage, ".", replica, ": ", status.ToString()));
    fixture_.AnswerAbort(stage, replica, status);
  }

  void AdvanceClock(int ms) {
    Trace(absl::StrCat("advance ", ms, " ms"));
    fixture_.AdvanceClock(absl::Milliseconds(ms));
  }

  // A later GenerateDuplex message from a client: mostly well formed for its
  // own request, sometimes malformed, past its last, or another call's.
  void Input() {
    const std::vector<std::shared_ptr<CheckingSink>>& sinks = checker_.sinks();
    if (sinks.empty()) return;
    const CheckingSink* caller = sinks[in_.Below(static_cast<uint32_t>(sinks.size()))].get();
    const std::string id = in_.Below(4) != 0 ? caller->id() : Id();
    v1::GenerateInput message;
    switch (in_.Below(6)) {
      case 0:
        message.mutable_request()->set_prompt("again");
        break;
      case 1:
        message.mutable_input()->add_payloads();  // no content
        break;
      case 2:
        message.mutable_input()->add_payloads()->mutable_audio()->set_pcm_s16le("odd");
        break;
      default:
        message.mutable_input()->add_payloads()->mutable_text()->set_text("more ");
    }
    if (message.has_input()) message.mutable_input()->set_last(in_.Below(3) == 0);
    Trace(absl::StrCat("input for ", id, " by ", caller->label(), ": ",
                       message.ShortDebugString()));
    fixture_.core().AppendInput(id, caller, std::move(message));
  }

  void Other() {
    switch (in_.Below(5)) {
      case 4:
        return Input();
      case 0: {
        const int stage = Stage();
        const int replica = Replica(stage);
        const absl::Status status[] = {absl::OkStatus(), absl::UnavailableError("session closed"),
                                       absl::ResourceExhaustedError("too large")};
        const absl::Status& chosen = status[in_.Below(3)];
        Trace(absl::StrCat("sends to ", stage, ".", replica, " answer ", chosen.ToString()));
        fixture_.replica(stage, replica).FailCommands(chosen);
        return;
      }
      case 1: {
        const absl::Duration grace = absl::Milliseconds(500 * in_.Below(3));
        if (draining_) return;
        draining_ = true;
        Trace("drain");
        fixture_.core().Drain(fixture_.scheduler().Now() + grace, [this] { ++drained_; });
        return;
      }
      case 2: {
        const v1::PipelineStatus status = fixture_.core().Status();
        FUZZ_CHECK(status.in_flight_requests() == static_cast<int>(fixture_.core().in_flight()),
                   "status says ", status.in_flight_requests(), " in flight");
        fixture_.core().SnapshotMetrics();
        return;
      }
      default: {
        v1::StageUtilityRequest request;
        request.set_stage_id(static_cast<int>(in_.Below(4)) - 1);
        request.set_name("stats");
        int answers = 0;
        fixture_.core().CallStageUtility(
            request, [&answers](absl::StatusOr<v1::StageUtilityResponse>) { ++answers; });
        FUZZ_CHECK(answers == 1, "a utility call answered ", answers, " times");
      }
    }
  }

  // Lets everything end: sends work again, every waiting Abort call succeeds,
  // the clock moves past every timer, and a drain aborts what is left.
  void Settle() {
    for (int s = 0; s < fixture_.stages(); ++s) {
      for (int r = 0; r < fixture_.replicas(s); ++r) fixture_.replica(s, r).FailCommands({});
    }
    if (!draining_) {
      draining_ = true;
      Trace("settle: drain");
      fixture_.core().Drain(fixture_.scheduler().Now(), [this] { ++drained_; });
    }
    for (int round = 0;; ++round) {
      const size_t held = fixture_.held_aborts();
      for (int s = 0; s < fixture_.stages(); ++s) {
        for (int r = 0; r < fixture_.replicas(s); ++r) AnswerAll(s, r, absl::OkStatus());
      }
      checker_.CheckStep();
      if (held == 0 && fixture_.scheduler().pending() == 0) return;
      FUZZ_CHECK(round < 100, "still not settled after ", round, " rounds: ",
                 fixture_.core().in_flight(), " in flight, ", fixture_.scheduler().pending(),
                 " timers");
      fixture_.AdvanceClock(absl::Seconds(5));
    }
  }

  CoreFixture fixture_;
  CoreChecker checker_;
  FuzzInput& in_;
  const bool identities_;
  const bool failover_;
  const bool routing_;
  std::vector<std::vector<int>> incarnation_;
  uint32_t aborts_ = 0;
  const bool trace_;
  bool draining_ = false;
  int drained_ = 0;
};

}  // namespace
}  // namespace fuzz
}  // namespace omnistage

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omnistage::InitLogging({"fuzz", omnistage::LogFormat::kText, omnistage::LogLevel::kError});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  omnistage::fuzz::FuzzInput in(data, size);
  bool identities = false;
  bool failover = false;
  bool routing = false;
  omnistage::PipelineConfig config =
      omnistage::fuzz::Pipeline(in, &identities, &failover, &routing);
  omnistage::fuzz::CoreFuzzer fuzzer(std::move(config), identities, failover, routing, &in);
  fuzzer.Run();
  return 0;
}
