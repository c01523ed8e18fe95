#include "fuzz/worker_harness.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/limits.h"
#include "fuzz/fuzz_check.h"

namespace omnistage {
namespace fuzz {
namespace {

// Records each answer of a worker Abort in `call`.
std::function<void(absl::StatusOr<std::vector<std::string>>)> AnswerTo(
    std::shared_ptr<AbortCall> call) {
  return [call](absl::StatusOr<std::vector<std::string>> result) {
    {
      absl::MutexLock lock(&call->mu);
      ++call->answers;
      call->result = std::move(result);
    }
    call->done.Notify();
  };
}

bool IsRequestId(const std::string& id) { return !id.empty() && id.size() <= kMaxRequestIdBytes; }

}  // namespace

void Await(AbortCall& call) {
  FUZZ_CHECK(call.done.WaitForNotificationWithTimeout(kPatience), "a worker Abort never answered");
}

WorkerHarness::WorkerHarness(std::unique_ptr<Engine> engine, bool trace) : trace_(trace) {
  WorkerOptions options;
  options.engine_name = "sim_llm";
  options.instance_id = "fuzz";
  worker_ = std::make_unique<Worker>(options, std::move(engine));
}

void WorkerHarness::StartLoop() {
  if (started_) return;
  started_ = true;
  Trace("the busy loop starts");
  worker_->Start();
}

OpenedSession* WorkerHarness::AddSession(std::unique_ptr<OpenedSession> session) {
  sessions_.push_back(std::move(session));
  return sessions_.back().get();
}

void WorkerHarness::Trace(const std::string& what) const {
  if (trace_) std::fprintf(stderr, "fuzz: %s\n", what.c_str());
}

uint64_t WorkerHarness::NextSeq(OpenedSession& s, bool stale) {
  if (stale) return s.last_seq == 0 ? 0 : s.last_seq - 1;
  s.last_seq += 2;
  return s.last_seq;
}

void WorkerHarness::Send(OpenedSession& s, v1::WorkerCommand& command, Expect expect) {
  // Whether that Add is taken is not known yet: count it as open (a last
  // chunk for a request whose input is complete only fails it).
  if (command.has_add() && !command.add().input_complete()) {
    s.input_open.insert(command.add().request_id());
  }
  if (command.has_append_input() && command.append_input().last() && expect == Expect::kTaken) {
    s.input_open.erase(command.append_input().request_id());
  }
  Trace(absl::StrCat(s.recorder->label(), " <- ", command.ShortDebugString()));
  s.recorder->Sent(command, expect);
  worker_->HandleCommand(*s.session, command);
}

void WorkerHarness::Close(OpenedSession& s) {
  Trace(absl::StrCat(s.recorder->label(), " closed"));
  s.closed = true;
  worker_->CloseSession(*s.session);
  s.session->End(absl::OkStatus());
}

std::shared_ptr<AbortCall> WorkerHarness::Abort(const v1::WorkerAbortRequest& request,
                                                const std::string& peer) {
  auto call = std::make_shared<AbortCall>();
  call->ids.assign(request.request_ids().begin(), request.request_ids().end());
  aborts_.push_back(call);
  Trace(absl::StrCat("abort ", request.ShortDebugString(), " from '", peer, "'"));
  worker_->Abort(request, AnswerTo(call), peer);
  return call;
}

// False if the loop stopped meanwhile.
bool WorkerHarness::RunToIdle(const std::vector<OpenedSession*>& open) {
  if (open.empty()) return true;
  for (OpenedSession* s : open) {
    const std::set<std::string> ids = s->input_open;
    for (const std::string& id : ids) {
      if (!IsRequestId(id)) continue;
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
    command.mutable_utility()->set_call_id(NextUtilityCallId());
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

void WorkerHarness::Settle() {
  StartLoop();
  std::vector<OpenedSession*> open;
  for (auto& s : sessions_) {
    if (!s->closed && !s->recorder->stream_ended()) open.push_back(s.get());
  }
  bool stopped = !RunToIdle(open);
  for (OpenedSession* s : open) {
    v1::WorkerAbortRequest request;
    request.set_session_id(s->session->id());
    request.set_after_seq(s->last_seq);
    for (const std::string& id : s->recorder->added_ids()) {
      if (IsRequestId(id)) request.add_request_ids(id);
    }
    auto call = std::make_shared<AbortCall>();
    worker_->Abort(request, AnswerTo(call), s->peer);
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

void WorkerHarness::FlushAll() {
  for (bool any = true; any;) {
    any = false;
    for (auto& s : sessions_) any |= s->recorder->CompleteWrite();
  }
}

}  // namespace fuzz
}  // namespace omnistage
