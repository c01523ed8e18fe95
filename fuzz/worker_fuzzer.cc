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
// Checked as it runs (fuzz/session_recorder.h) and at the end, after every
// open session had all its requests aborted: every Add the worker took ended
// exactly once on its session, refusals are as documented, every Abort call
// answered once with only ids it named, the worker shuts down and every stream
// ends once. Nothing may hang: every wait is bounded, and a timeout is a
// failure.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/field_error.h"
#include "common/log.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/session_recorder.h"
#include "stage_worker/engines/registry.h"
#include "stage_worker/worker.h"

namespace omnistage {
namespace fuzz {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(20);
const char* const kPeers[] = {"", "orchestrator-a", "orchestrator-b"};

// What one worker Abort call got.
struct AbortCall {
  std::vector<std::string> ids;
  absl::Notification done;
  absl::Mutex mu;
  int answers ABSL_GUARDED_BY(mu) = 0;
  absl::StatusOr<std::vector<std::string>> result ABSL_GUARDED_BY(mu);
};

struct OpenedSession {
  std::unique_ptr<SessionRecorder> recorder;
  std::shared_ptr<Session> session;
  std::string peer;
  uint64_t last_seq = 0;
  bool closed = false;
  // Ids of Adds that said more input comes, with no last chunk sent since.
  std::set<std::string> input_open;
};

class WorkerFuzzer {
 public:
  explicit WorkerFuzzer(FuzzInput* in) : in_(*in) {
    std::map<std::string, std::string> params = {
        {"batch_size", absl::StrCat(1 + in_.Below(4))},
        {"max_tokens", absl::StrCat(1 + in_.Below(4))},
        {"output", in_.Bool() ? "text" : "tokens"}};
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
    WorkerOptions options;
    options.engine_name = "sim_llm";
    options.instance_id = "fuzz";
    worker_ = std::make_unique<Worker>(options, *std::move(engine));
  }

  void Run() {
    for (int steps = 0; !in_.empty() && steps < 300; ++steps) {
      if (steps == start_after_) StartLoop();
      Step();
    }
    StartLoop();
    Settle();
  }

 private:
  void StartLoop() {
    if (started_) return;
    started_ = true;
    Trace("the busy loop starts");
    worker_->Start();
  }

  // Operations read all their bytes before they look at state, so that an
  // operation's encoding does not depend on what came before.
  uint32_t SessionIndex() { return in_.Below(static_cast<uint32_t>(sessions_.size())); }
  // Session `index` if it is open, else null.
  OpenedSession* SessionAt(uint32_t index) {
    if (index >= sessions_.size()) return nullptr;
    OpenedSession& s = *sessions_[index];
    if (s.closed) return nullptr;
    if (s.recorder->stream_ended()) {
      // The worker ended the stream: the reactor closes the session, as gRPC's would.
      Close(s);
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
  void Close(OpenedSession& s) {
    Trace(absl::StrCat(s.recorder->label(), " closed"));
    s.closed = true;
    worker_->CloseSession(*s.session);
    s.session->End(absl::OkStatus());
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
        if (OpenedSession* s = SessionAt(SessionIndex())) Close(*s);
        return;
      case 7:
      case 8:
        if (OpenedSession* s = SessionAt(SessionIndex())) s->recorder->CompleteWrite();
        return;
      default: {
        const bool drain = in_.Below(4) == 0;
        if (drain && !drained_) {
          drained_ = true;
          StartLoop();  // A drain waits for the loop to stop what is left.
          Trace("drain");
          worker_->Drain(absl::ZeroDuration());
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
    s->recorder = std::make_unique<SessionRecorder>(absl::StrCat("session #", sessions_.size()),
                                                    /*inline_writes=*/in_.Below(4) != 0, trace_);
    s->peer = kPeers[in_.Below(3)];
    s->last_seq = 2 * in_.Below(3);
    if (sessions_.size() >= 4) return;
    absl::StatusOr<std::shared_ptr<Session>> session =
        worker_->OpenSession(hello, s->last_seq, s->recorder.get(), s->peer);
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
    Trace(absl::StrCat(s->recorder->label(), " opened: ", hello.ShortDebugString()));
    s->session = *std::move(session);
    s->recorder->Attach(s->session);
    worker_->StartSession(s->session);
    sessions_.push_back(std::move(s));
  }

  // The seq of the next command: fresh (after the last), or, when `stale`, one
  // that does not increase, which must be refused. Fresh ones are even, so
  // stale ones never repeat a fresh one.
  static uint64_t NextSeq(OpenedSession& s, bool stale) {
    if (stale) return s.last_seq == 0 ? 0 : s.last_seq - 1;
    s.last_seq += 2;
    return s.last_seq;
  }

  void Send(OpenedSession& s, v1::WorkerCommand& command, Expect expect) {
    // Whether that Add is taken is not known yet: count it as open (a last
    // chunk for a request whose input is complete only fails it).
    if (command.has_add() && !command.add().input_complete()) {
      s.input_open.insert(command.add().request_id());
    }
    if (command.has_append_input() && command.append_input().last() &&
        expect == Expect::kTaken) {
      s.input_open.erase(command.append_input().request_id());
    }
    Trace(absl::StrCat(s.recorder->label(), " <- ", command.ShortDebugString()));
    s.recorder->Sent(command, expect);
    worker_->HandleCommand(*s.session, command);
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
    command.set_seq(NextSeq(*s, stale));
    const bool bad = stale || !valid_id || payload == 3 || max_tokens == 4 || bad_extra;
    // An id never added on this session is not live there: a good Add of it
    // must be taken.
    const std::vector<std::string> before = s->recorder->added_ids();
    const bool fresh = std::find(before.begin(), before.end(), add->request_id()) == before.end();
    Send(*s, command, bad ? Expect::kRefused : fresh ? Expect::kTaken : Expect::kEither);
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
    command.set_seq(NextSeq(*s, stale));
    Send(*s, command, stale || !valid_id ? Expect::kRefused : Expect::kTaken);
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
    command.set_seq(NextSeq(*s, stale));
    switch (kind) {
      case 0: {
        v1::UtilityCall* call = command.mutable_utility();
        call->set_call_id(++utility_calls_);
        call->set_name(name);
        call->mutable_args()->add_values()->set_number_value(6);
        call->mutable_args()->add_values()->set_number_value(divisor);
        return Send(*s, command, stale ? Expect::kRefused : Expect::kTaken);
      }
      case 1:
        command.mutable_drain_ack();
        return Send(*s, command, Expect::kEither);
      case 2:
        command.mutable_hello()->set_protocol_version(1);
        return Send(*s, command, Expect::kRefused);
      default:
        return Send(*s, command, Expect::kRefused);  // No command at all.
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
    if (index >= sessions_.size()) return;
    OpenedSession& s = *sessions_[index];
    const std::string number = absl::StrCat(s.session->number());
    const std::string id = who == 0 ? number                       // The number alone.
                           : who == 1 ? s.session->id() + "0"      // A wrong secret.
                           : who == 2 ? "999-x"                    // No such session.
                                      : s.session->id();
    const std::string peer = right_peer ? s.peer : s.peer + "-impostor";
    request.set_session_id(id);
    request.set_after_seq(fence == 0 ? 0 : fence == 1 ? s.last_seq + 2 : s.last_seq);
    auto call = std::make_shared<AbortCall>();
    call->ids.assign(request.request_ids().begin(), request.request_ids().end());
    aborts_.push_back(call);
    Trace(absl::StrCat("abort ", request.ShortDebugString(), " from '", peer, "'"));
    worker_->Abort(
        request,
        [call](absl::StatusOr<std::vector<std::string>> result) {
          {
            absl::MutexLock lock(&call->mu);
            ++call->answers;
            call->result = std::move(result);
          }
          call->done.Notify();
        },
        peer);
    // A refusal answers at once.
    const bool owner = who >= 3 && right_peer;
    if (!all_valid) {
      FUZZ_CHECK(call->done.HasBeenNotified(), "an Abort of bad ids did not answer at once");
      absl::MutexLock lock(&call->mu);
      FUZZ_CHECK(call->result.status().code() == absl::StatusCode::kInvalidArgument &&
                     absl::StartsWith(call->result.status().message(), "request_ids"),
                 "an Abort of bad ids: ", call->result.status().ToString());
    } else if (!owner && !s.closed) {
      FUZZ_CHECK(call->done.HasBeenNotified(), "an Abort naming a session it may not stop (",
                 id, " from '", peer, "') did not answer at once");
      absl::MutexLock lock(&call->mu);
      FUZZ_CHECK(call->result.status().code() == absl::StatusCode::kNotFound,
                 "an Abort naming a session it may not stop (", id, " from '", peer,
                 "'): ", call->result.ok() ? "OK" : call->result.status().ToString());
    }
  }

  // Waits for `call`; a bounded wait, so a lost answer fails rather than hangs.
  static void Await(AbortCall& call) {
    FUZZ_CHECK(call.done.WaitForNotificationWithTimeout(kPatience),
               "a worker Abort never answered");
  }

  // Lets every request run to its own end: its input is complete now, and the
  // engine is asked for its load until it holds nothing (so that whatever a
  // request would still emit has been emitted). False if the loop stopped.
  bool RunToIdle(const std::vector<OpenedSession*>& open) {
    if (open.empty()) return true;
    for (OpenedSession* s : open) {
      const std::set<std::string> ids = s->input_open;
      for (const std::string& id : ids) {
        if (id.empty() || id.size() > kMaxRequestIdBytes) continue;
        v1::WorkerCommand command;
        command.set_seq(NextSeq(*s, /*stale=*/false));
        command.mutable_append_input()->set_request_id(id);
        command.mutable_append_input()->set_last(true);
        Send(*s, command, Expect::kTaken);
      }
    }
    OpenedSession& s = *open.front();
    for (int poll = 0; poll < 1000; ++poll) {
      v1::WorkerCommand command;
      command.set_seq(NextSeq(s, /*stale=*/false));
      command.mutable_utility()->set_call_id(++utility_calls_);
      command.mutable_utility()->set_name("stats");
      Send(s, command, Expect::kTaken);
      std::optional<google::protobuf::Value> stats =
          s.recorder->AwaitUtility(command.utility().call_id(), kPatience);
      if (!stats.has_value()) return false;
      const auto& fields = stats->struct_value().fields();
      if (fields.at("running").number_value() == 0 && fields.at("waiting").number_value() == 0) {
        return true;
      }
    }
    FUZZ_CHECK(false, "the engine still has work after 1000 steps of requests of a few tokens");
  }

  // Lets every request end, stops what is left on every open session, checks
  // the accounts, then shuts the worker down and checks that everything ended
  // once.
  void Settle() {
    std::vector<OpenedSession*> open;
    for (auto& s : sessions_) {
      if (!s->closed && !s->recorder->stream_ended()) open.push_back(s.get());
    }
    bool stopped = !RunToIdle(open);
    for (OpenedSession* s : open) {
      auto call = std::make_shared<AbortCall>();
      v1::WorkerAbortRequest request;
      request.set_session_id(s->session->id());
      request.set_after_seq(s->last_seq);
      for (const std::string& id : s->recorder->added_ids()) {
        if (!id.empty() && id.size() <= kMaxRequestIdBytes) request.add_request_ids(id);
      }
      worker_->Abort(
          request,
          [call](absl::StatusOr<std::vector<std::string>> result) {
            {
              absl::MutexLock lock(&call->mu);
              ++call->answers;
              call->result = std::move(result);
            }
            call->done.Notify();
          },
          s->peer);
      Await(*call);
      // Not OK: the loop has stopped (a fatal step), and what it held is lost
      // with the sessions, which the worker is ending.
      absl::MutexLock lock(&call->mu);
      stopped |= !call->result.ok();
    }
    FlushAll();
    for (auto& s : sessions_) stopped |= s->recorder->fatal_seen();
    for (OpenedSession* s : open) s->recorder->Check(!stopped && !s->recorder->stream_ended());
    worker_->RequestShutdown();
    (void)worker_->Wait();
    FlushAll();
    for (auto& s : sessions_) {
      s->recorder->Check(false);
      if (!s->closed) Close(*s);
      FlushAll();
      FUZZ_CHECK(s->recorder->stream_ended(), "a session's stream never ended");
    }
    for (const std::shared_ptr<AbortCall>& call : aborts_) {
      Await(*call);
      absl::MutexLock lock(&call->mu);
      FUZZ_CHECK(call->answers == 1, "a worker Abort answered ", call->answers, " times");
      if (!call->result.ok()) continue;
      std::set<std::string> seen;
      for (const std::string& id : *call->result) {
        FUZZ_CHECK(std::find(call->ids.begin(), call->ids.end(), id) != call->ids.end(),
                   "an Abort reports '", id, "' aborted, which it did not name");
        FUZZ_CHECK(seen.insert(id).second, "an Abort reports '", id, "' aborted twice");
      }
    }
  }

  // With FUZZ_TRACE set, what the target does is printed as it runs, and
  // every event the sessions get (to read a crash).
  void Trace(const std::string& what) const {
    if (trace_) std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  }

  void FlushAll() {
    for (bool any = true; any;) {
      any = false;
      for (auto& s : sessions_) any |= s->recorder->CompleteWrite();
    }
  }

  FuzzInput& in_;
  // Before the worker: its sessions write to these until it is gone.
  std::vector<std::unique_ptr<OpenedSession>> sessions_;
  std::vector<std::shared_ptr<AbortCall>> aborts_;
  std::unique_ptr<Worker> worker_;
  const bool trace_ = std::getenv("FUZZ_TRACE") != nullptr;
  int start_after_ = 0;
  bool started_ = false;
  uint64_t utility_calls_ = 0;
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
