// Fuzz target, stateful: a stage worker's command handling (stage_worker/
// worker.h) with its real busy loop, over a simulated engine (sim_llm with no
// step time, small batches, sometimes a fatal step).
//
// Input: a few bytes of engine set-up, then operations: open a session (Hello
// with good or bad version, stage and defaults; a fast or a slow reader), and
// on a session: Add (good, stale seq, bad id, bad input or parameters, an id in
// use), AppendInput, a utility call, DrainAck, a second Hello, an empty
// command, a worker Abort (right or wrong session id, peer, fence and ids),
// the stream breaking, the slow reader reading; also Drain.
//
// Checked as it runs (fuzz/session_recorder.h), here (refused Hellos and
// Aborts answer at once, with the documented codes) and at the end
// (fuzz/worker_harness.h): every Add the worker took ended exactly once on its
// session, refusals are as documented, every Abort call answered once with
// only ids it named, the worker shuts down and every stream ends once.
// Nothing may hang: every wait is bounded, and a timeout is a failure.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/field_error.h"
#include "common/limits.h"
#include "common/log.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/session_recorder.h"
#include "fuzz/worker_harness.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/worker.h"

namespace omnistage {
namespace fuzz {
namespace {

const char* const kPeers[] = {"", "orchestrator-a", "orchestrator-b"};

class WorkerFuzzer {
 public:
  explicit WorkerFuzzer(FuzzInput* in) : in_(*in) {
    std::map<std::string, std::string> params = {
        {"batch_size", absl::StrCat(1 + in_.Below(4))},
        {"max_tokens", absl::StrCat(1 + in_.Below(4))},
        {"output", in_.Bool() ? "text" : "tokens"},
        {"test_utilities", "true"}};  // div, one of the utilities it calls
    const bool fail = in_.Below(8) == 0;
    const uint32_t fail_at = 1 + in_.Below(30);
    if (fail) params["fail_at_step"] = absl::StrCat(fail_at);
    // The busy loop starts after this many operations: what they queue meets a
    // loop that has not looked yet, in a known order (a busy loop's view).
    const bool delayed = in_.Below(4) == 0;
    const int after = static_cast<int>(in_.Below(16));
    start_after_ = delayed ? after : 0;
    absl::StatusOr<std::unique_ptr<Engine>> engine = CreateEngine("sim_llm", params);
    FUZZ_CHECK(engine.ok(), engine.status().ToString());
    harness_ = std::make_unique<WorkerHarness>(*std::move(engine), trace_);
  }

  void Run() {
    for (int steps = 0; !in_.empty() && steps < 300; ++steps) {
      if (steps == start_after_) harness_->StartLoop();
      Step();
    }
    harness_->Settle();
  }

 private:
  // Operations read all their bytes before they look at state, so that an
  // operation's encoding does not depend on what came before.
  uint32_t SessionIndex() { return in_.Below(static_cast<uint32_t>(harness_->sessions().size())); }
  // ConnectSession `index` if it is open, else null.
  OpenedSession* SessionAt(uint32_t index) {
    if (index >= harness_->sessions().size()) return nullptr;
    OpenedSession& s = *harness_->sessions()[index];
    if (s.closed) return nullptr;
    if (s.recorder->stream_ended()) {
      // The worker ended the stream: the reactor closes the session, as gRPC's would.
      harness_->Close(s);
      return nullptr;
    }
    return &s;
  }
  std::string RequestId(bool* valid) {
    const uint32_t pick = in_.Below(8);
    *valid = pick < 6;
    if (pick < 6) return std::string(1, static_cast<char>('a' + pick % 4));
    return pick == 6 ? "" : std::string(kMaxRequestIdBytes + 1, 'x');
  }
  void Step() {
    switch (in_.Below(10)) {
      case 0:
        return Open();
      case 1:
      case 2:
        return Add();
      case 3:
        return Append();
      case 4:
        return OtherCommand();
      case 5:
        return Abort();
      case 6:
        if (OpenedSession* s = SessionAt(SessionIndex())) harness_->Close(*s);
        return;
      case 7:
      case 8:
        if (OpenedSession* s = SessionAt(SessionIndex())) s->recorder->CompleteWrite();
        return;
      default: {
        const bool drain = in_.Below(4) == 0;
        if (drain && !drained_) {
          drained_ = true;
          harness_->StartLoop();  // A drain waits for the loop to stop what is left.
          harness_->Trace("drain");
          harness_->worker().Drain(absl::ZeroDuration());
        }
      }
    }
  }

  void Open() {
    v1::Hello hello;
    hello.set_protocol_version(in_.Below(8) == 0 ? 2 : 1);
    const bool expect_stage = in_.Below(4) == 0;
    const int stage = static_cast<int>(in_.Below(2));
    if (expect_stage) hello.set_expected_stage_id(stage);
    const uint32_t defaults = in_.Below(4);
    if (defaults == 1) hello.mutable_defaults()->set_max_tokens(2);
    if (defaults == 2) (*hello.mutable_defaults()->mutable_extra())["bogus"] = "1";
    auto s = std::make_unique<OpenedSession>();
    s->recorder =
        std::make_unique<SessionRecorder>(absl::StrCat("session #", harness_->sessions().size()),
                                          /*inline_writes=*/in_.Below(4) != 0, trace_);
    s->peer = kPeers[in_.Below(3)];
    s->last_seq = 2 * in_.Below(3);
    if (harness_->sessions().size() >= 4) return;
    absl::StatusOr<std::shared_ptr<ConnectSession>> session =
        harness_->worker().OpenSession(hello, s->last_seq, s->recorder.get(), s->peer);
    const bool bad_stage = hello.has_expected_stage_id() && hello.expected_stage_id() != 0;
    if (hello.protocol_version() > Worker::kProtocolVersion || bad_stage) {
      FUZZ_CHECK(session.status().code() == absl::StatusCode::kFailedPrecondition,
                 "a Hello it cannot serve: ", session.status().ToString());
      return;
    }
    if (defaults == 2) {
      FUZZ_CHECK(session.status().code() == absl::StatusCode::kInvalidArgument &&
                     absl::StartsWith(ErrorField(session.status()), "defaults.extra"),
                 "defaults its engine refuses: ", session.status().ToString(), " at '",
                 ErrorField(session.status()), "'");
      return;
    }
    FUZZ_CHECK(session.ok(), "a good Hello refused: ", session.status().ToString());
    harness_->Trace(absl::StrCat(s->recorder->label(), " opened: ", hello.ShortDebugString()));
    s->session = *std::move(session);
    s->recorder->Attach(s->session);
    harness_->worker().StartSession(s->session);
    harness_->AddSession(std::move(s));
  }

  static void AddPayload(uint32_t kind, google::protobuf::RepeatedPtrField<v1::Payload>* out) {
    if (kind == 1) out->Add()->mutable_text()->set_text("some words");
    if (kind == 2) out->Add()->mutable_tokens()->add_ids(42);
    if (kind == 3) out->Add()->mutable_audio()->set_pcm_s16le("pcm");
  }

  void Add() {
    const uint32_t index = SessionIndex();
    const bool stale = in_.Below(8) == 0;
    v1::WorkerCommand command;
    bool valid_id = false;
    v1::AddRequest* add = command.mutable_add();
    add->set_request_id(RequestId(&valid_id));
    const uint32_t payload = in_.Below(4);
    AddPayload(payload, add->mutable_input());
    add->set_input_complete(in_.Below(4) != 0);
    const uint32_t max_tokens = in_.Below(5);  // 0: unset; 4: out of range.
    if (max_tokens > 0) add->mutable_params()->set_max_tokens(max_tokens == 4 ? 0 : max_tokens);
    const bool bad_extra = in_.Below(8) == 0;
    if (bad_extra) (*add->mutable_params()->mutable_extra())["bogus"] = "1";
    OpenedSession* s = SessionAt(index);
    if (s == nullptr) return;
    command.set_seq(WorkerHarness::NextSeq(*s, stale));
    const bool bad = stale || !valid_id || payload == 3 || max_tokens == 4 || bad_extra;
    // An id never added on this session is not live there: a good Add of it
    // must be taken.
    const std::vector<std::string> before = s->recorder->added_ids();
    const bool fresh = std::find(before.begin(), before.end(), add->request_id()) == before.end();
    harness_->Send(*s, command, bad ? Expect::kRefused : fresh ? Expect::kTaken : Expect::kEither);
  }

  void Append() {
    const uint32_t index = SessionIndex();
    const bool stale = in_.Below(8) == 0;
    v1::WorkerCommand command;
    bool valid_id = false;
    v1::AppendInput* append = command.mutable_append_input();
    append->set_request_id(RequestId(&valid_id));
    AddPayload(in_.Below(4), append->mutable_chunks());
    append->set_last(in_.Bool());
    OpenedSession* s = SessionAt(index);
    if (s == nullptr) return;
    command.set_seq(WorkerHarness::NextSeq(*s, stale));
    harness_->Send(*s, command, stale || !valid_id ? Expect::kRefused : Expect::kTaken);
  }

  void OtherCommand() {
    const uint32_t index = SessionIndex();
    const bool stale = in_.Below(8) == 0;
    const uint32_t kind = in_.Below(4);
    const std::string name = in_.Pick<std::string>({"ping", "stats", "div", "no_such_utility"});
    const uint32_t divisor = in_.Below(3);
    OpenedSession* s = SessionAt(index);
    if (s == nullptr) return;
    v1::WorkerCommand command;
    command.set_seq(WorkerHarness::NextSeq(*s, stale));
    switch (kind) {
      case 0: {
        v1::UtilityCall* call = command.mutable_utility();
        call->set_call_id(harness_->NextUtilityCallId());
        call->set_name(name);
        call->mutable_args()->add_values()->set_number_value(6);
        call->mutable_args()->add_values()->set_number_value(divisor);
        return harness_->Send(*s, command, stale ? Expect::kRefused : Expect::kTaken);
      }
      case 1:
        command.mutable_drain_ack();
        return harness_->Send(*s, command, Expect::kEither);
      case 2:
        command.mutable_hello()->set_protocol_version(1);
        return harness_->Send(*s, command, Expect::kRefused);
      default:
        return harness_->Send(*s, command, Expect::kRefused);  // No command at all.
    }
  }

  void Abort() {
    const uint32_t index = SessionIndex();
    const uint32_t who = in_.Below(6);
    const bool right_peer = in_.Below(6) != 0;
    const uint32_t fence = in_.Below(4);
    v1::WorkerAbortRequest request;
    bool all_valid = true;
    for (int n = static_cast<int>(in_.Below(4)); n > 0; --n) {
      bool valid = false;
      request.add_request_ids(RequestId(&valid));
      all_valid &= valid;
    }
    if (index >= harness_->sessions().size()) return;
    OpenedSession& s = *harness_->sessions()[index];
    const std::string number = absl::StrCat(s.session->number());
    const std::string id = who == 0   ? number                 // The number alone.
                           : who == 1 ? s.session->id() + "0"  // A wrong secret.
                           : who == 2 ? "999-x"                // No such session.
                                      : s.session->id();
    const std::string peer = right_peer ? s.peer : s.peer + "-impostor";
    request.set_session_id(id);
    request.set_after_seq(fence == 0 ? 0 : fence == 1 ? s.last_seq + 2 : s.last_seq);
    std::shared_ptr<AbortCall> call = harness_->Abort(request, peer);
    // A refusal answers at once.
    const bool owner = who >= 3 && right_peer;
    if (!all_valid) {
      FUZZ_CHECK(call->done.HasBeenNotified(), "an Abort of bad ids did not answer at once");
      absl::MutexLock lock(&call->mu);
      FUZZ_CHECK(call->result.status().code() == absl::StatusCode::kInvalidArgument &&
                     absl::StartsWith(call->result.status().message(), "request_ids"),
                 "an Abort of bad ids: ", call->result.status().ToString());
    } else if (!owner && !s.closed) {
      FUZZ_CHECK(call->done.HasBeenNotified(), "an Abort naming a session it may not stop (", id,
                 " from '", peer, "') did not answer at once");
      absl::MutexLock lock(&call->mu);
      FUZZ_CHECK(call->result.status().code() == absl::StatusCode::kNotFound,
                 "an Abort naming a session it may not stop (", id, " from '", peer,
                 "'): ", call->result.ok() ? "OK" : call->result.status().ToString());
    }
  }

  FuzzInput& in_;
  // With FUZZ_TRACE set, what happens is printed as it runs (to read a crash).
  const bool trace_ = std::getenv("FUZZ_TRACE") != nullptr;
  std::unique_ptr<WorkerHarness> harness_;
  int start_after_ = 0;
  bool drained_ = false;
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
  omnistage::fuzz::WorkerFuzzer fuzzer(&in);
  fuzzer.Run();
  return 0;
}
