#include "fuzz/core_checker.h"

#include <iterator>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "fuzz/fuzz_check.h"

namespace omnistage {
namespace fuzz {

CoreChecker::CoreChecker(CoreFixture* fixture) : fixture_(fixture) {
  for (int s = 0; s < fixture_->stages(); ++s) {
    for (int r = 0; r < fixture_->replicas(s); ++r) {
      instances_[absl::StrCat(s, ".", r)] = fixture_->core().pool(s).state(r).instance_id;
    }
  }
}

void CoreChecker::NoteId(const std::string& id) {
  if (id_set_.insert(id).second) id_list_.push_back(id);
}

std::shared_ptr<CheckingSink> CoreChecker::NewSink(const std::string& asked_id) {
  auto sink = std::make_shared<CheckingSink>(absl::StrCat("Generate #", sinks_.size()));
  sink->set_on_finish(
      [this](const std::string& id, const v1::Terminal& terminal) { OnFinish(id, terminal); });
  sinks_.push_back(sink);
  if (!asked_id.empty()) NoteId(asked_id);
  return sink;
}

std::shared_ptr<CheckingSink> CoreChecker::InFlight(const std::string& id) const {
  // The latest call admitted under `id` (an id is reused only after its end).
  for (auto it = sinks_.rbegin(); it != sinks_.rend(); ++it) {
    if ((*it)->started() && (*it)->id() == id) return (*it)->ended() ? nullptr : *it;
  }
  return nullptr;
}

void CoreChecker::OnFinish(const std::string& id, const v1::Terminal& terminal) {
  ended_at_[id] = fixture_->log().size();
  // What the workers still run of it is its clean-up's affair, which may give
  // up (documented); a later request under the same id starts afresh.
  ScanWorkerCalls();
  for (auto it = running_.begin(); it != running_.end();) {
    it = std::get<2>(*it) == id ? running_.erase(it) : std::next(it);
  }
  if (terminal.finish_reason() != v1::FINISH_REASON_ABORT) return;
  for (int s = 0; s < fixture_->stages(); ++s) {
    const std::optional<int> bound = fixture_->core().pool(s).Bound(id);
    FUZZ_CHECK(!bound.has_value(), id, " ended with ABORT while still bound to stage ", s,
               " replica ", *bound, ": committed before that stage confirmed the stop");
  }
}

std::function<void(absl::StatusOr<v1::AbortResponse>)> CoreChecker::NewAbort(
    const v1::AbortRequest& request, absl::Time worker_deadline, const std::string& caller) {
  auto abort = std::make_unique<ClientAbort>();
  abort->caller = caller;
  abort->ids.assign(request.request_ids().begin(), request.request_ids().end());
  abort->worker_deadline = worker_deadline;
  for (const std::string& id : abort->ids) {
    if (std::shared_ptr<CheckingSink> sink = InFlight(id)) abort->in_flight[id] = sink;
  }
  ClientAbort* raw = abort.get();
  aborts_.push_back(std::move(abort));
  return [this, raw](absl::StatusOr<v1::AbortResponse> result) { OnAbortAnswer(*raw, result); };
}

void CoreChecker::OnAbortAnswer(ClientAbort& abort,
                                const absl::StatusOr<v1::AbortResponse>& result) {
  const std::string what = absl::StrCat("Abort [", absl::StrJoin(abort.ids, ","), "]");
  ScanWorkerCalls();  // Its calls so far count as made before it answered.
  FUZZ_CHECK(++abort.answers == 1, what, " answered twice");
  FUZZ_CHECK(result.ok(), what, " failed: ", result.status().ToString());
  FUZZ_CHECK(result->results_size() == static_cast<int>(abort.ids.size()), what, ": ",
             result->results_size(), " results");
  for (size_t i = 0; i < abort.ids.size(); ++i) {
    const v1::AbortResult& r = result->results(static_cast<int>(i));
    const std::string& id = abort.ids[i];
    FUZZ_CHECK(r.request_id() == id, what, ": result ", i, " names '", r.request_id(), "'");
    auto it = abort.in_flight.find(id);
    const CheckingSink* sink = it == abort.in_flight.end() ? nullptr : it->second.get();
    if (sink != nullptr && sink->caller() != abort.caller) {
      FUZZ_CHECK(r.outcome() == v1::AbortResult::OUTCOME_NOT_FOUND, what, " by '", abort.caller,
                 "': '", id, "' of '", sink->caller(), "' has outcome ", r.outcome());
      continue;
    }
    switch (r.outcome()) {
      case v1::AbortResult::OUTCOME_ABORTED:
        FUZZ_CHECK(sink != nullptr && sink->finished() &&
                       sink->terminal().finish_reason() == v1::FINISH_REASON_ABORT,
                   what, ": '", id, "' reported aborted, but the request in flight then ",
                   sink == nullptr ? "did not exist" : "did not end with ABORT");
        break;
      case v1::AbortResult::OUTCOME_FAILED:
        FUZZ_CHECK(sink != nullptr && !sink->ended(), what, ": '", id,
                   "' reported failed but is not in flight");
        FUZZ_CHECK(r.has_error() && r.error().stage_id() >= 0, what, ": '", id,
                   "' failed without naming the stage");
        break;
      case v1::AbortResult::OUTCOME_NOT_FOUND:
        FUZZ_CHECK(sink == nullptr || sink->ended(), what, ": '", id,
                   "' reported not found while in flight");
        break;
      default:
        FUZZ_CHECK(false, what, ": '", id, "' has outcome ", r.outcome());
    }
  }
}

void CoreChecker::WorkerFinished(int stage, int replica, const std::string& id) {
  ScanWorkerCalls();  // An Add made in this same operation comes first.
  running_.erase({stage, replica, id});
}

void CoreChecker::WorkerAbortAnswered(int stage, int replica, const absl::Status& status) {
  ScanWorkerCalls();
  if (!status.ok()) return;
  FakeReplicaClient& fake = fixture_->replica(stage, replica);
  if (fake.held_aborts() == 0) return;
  const size_t call = fake.aborts().size() - fake.held_aborts();
  const std::string name = absl::StrCat(stage, ".", replica);
  // A call made to a session that broke since answers for nothing running now.
  if (call_epochs_[{name, call}] != epochs_[name]) return;
  for (const std::string& id : fake.aborts()[call]) running_.erase({stage, replica, id});
}

void CoreChecker::WorkerRefusedAdd(int stage, int replica, const std::string& id) {
  ScanWorkerCalls();
  running_.erase({stage, replica, id});
}

void CoreChecker::ScanWorkerCalls() {
  const std::vector<std::string>& log = fixture_->log();
  for (; scanned_ < log.size(); ++scanned_) {
    const std::string& line = log[scanned_];
    const size_t space = line.find(' ');
    if (space == std::string::npos) continue;
    const std::string call = line.substr(0, space);  // "<stage>.<replica>.<method>"
    const std::vector<std::string> parts = absl::StrSplit(call, '.');
    int stage = -1, replica = -1;
    FUZZ_CHECK(parts.size() == 3 && absl::SimpleAtoi(parts[0], &stage) &&
                   absl::SimpleAtoi(parts[1], &replica),
               "a fake call ", line);
    const std::string name = absl::StrCat(stage, ".", replica);
    if (parts[2] == "add" && !absl::EndsWith(line, " failed")) {
      running_.insert({stage, replica, line.substr(space + 1)});
    }
    if (parts[2] != "abort") continue;
    FakeReplicaClient& fake = fixture_->replica(stage, replica);
    const size_t k = calls_read_[name]++;
    call_epochs_[{name, k}] = epochs_[name];
    const std::vector<std::string>& ids = fake.aborts()[k];
    const absl::Time deadline = fake.abort_deadlines()[k];
    for (const std::string& id : ids) last_named_[{stage, replica, id}] = scanned_;
    for (const std::unique_ptr<ClientAbort>& abort : aborts_) {
      if (abort->worker_deadline != deadline) continue;
      FUZZ_CHECK(abort->answers == 0, "a worker Abort call (", line,
                 ") after the client Abort it serves answered");
      FUZZ_CHECK(++abort->calls[name] == 1, "a second worker Abort call to stage ", stage,
                 " replica ", replica, " for one client Abort [", absl::StrJoin(abort->ids, ","),
                 "]: ", line);
      for (const std::string& id : ids) {
        FUZZ_CHECK(std::find(abort->ids.begin(), abort->ids.end(), id) != abort->ids.end(),
                   "a client Abort [", absl::StrJoin(abort->ids, ","), "] stops '", id, "'");
      }
    }
  }
}

void CoreChecker::ForgetLostWork() {
  for (int s = 0; s < fixture_->stages(); ++s) {
    const StagePool& pool = fixture_->core().pool(s);
    for (int r = 0; r < fixture_->replicas(s); ++r) {
      std::string& instance = instances_[absl::StrCat(s, ".", r)];
      const std::string now = pool.alive(r) ? pool.state(r).instance_id : "";
      if (now == instance && !now.empty()) continue;
      instance = now;
      ++epochs_[absl::StrCat(s, ".", r)];
      for (auto it = running_.begin(); it != running_.end();) {
        it = std::get<0>(*it) == s && std::get<1>(*it) == r ? running_.erase(it) : std::next(it);
      }
    }
  }
}

void CoreChecker::CheckBindings() {
  ForgetLostWork();
  for (const auto& [stage, replica, id] : running_) {
    if (InFlight(id) == nullptr) continue;  // Its clean-up may give the binding up.
    const std::optional<int> bound = fixture_->core().pool(stage).Bound(id);
    FUZZ_CHECK(bound == replica, "in-flight ", id, " still runs on stage ", stage, " replica ",
               replica, " but is bound to ", bound.has_value() ? absl::StrCat(*bound) : "none",
               " there: the orchestrator lost track of it");
  }
  for (int s = 0; s < fixture_->stages(); ++s) {
    const StagePool& pool = fixture_->core().pool(s);
    size_t bindings = 0;
    for (const std::string& id : id_list_) {
      const std::optional<int> replica = pool.Bound(id);
      if (!replica.has_value()) continue;
      ++bindings;
      FUZZ_CHECK(pool.alive(*replica), id, " is bound to stage ", s, " replica ", *replica,
                 ", which is not alive");
      if (InFlight(id) != nullptr) continue;
      auto ended = ended_at_.find(id);
      FUZZ_CHECK(ended != ended_at_.end(), id, " is bound to stage ", s, " replica ", *replica,
                 " but was never admitted");
      auto named = last_named_.find({s, *replica, id});
      FUZZ_CHECK(named != last_named_.end() && named->second >= ended->second, id,
                 " ended but stays bound to stage ", s, " replica ", *replica,
                 " with no clean-up Abort sent there since");
    }
    FUZZ_CHECK(bindings == pool.bindings(), "stage ", s, " holds ", pool.bindings(),
               " bindings, ", bindings, " of them for requests this target made");
  }
}

void CoreChecker::CheckStep() {
  for (const std::shared_ptr<CheckingSink>& sink : sinks_) {
    if (sink->started()) NoteId(sink->id());
  }
  size_t in_flight = 0;
  for (const std::shared_ptr<CheckingSink>& sink : sinks_) {
    in_flight += sink->started() && !sink->ended();
  }
  FUZZ_CHECK(fixture_->core().in_flight() == in_flight, "the core has ",
             fixture_->core().in_flight(), " requests in flight; its clients see ", in_flight);
  ScanWorkerCalls();
  CheckBindings();
}

void CoreChecker::CheckSettled() {
  CheckStep();
  for (const std::shared_ptr<CheckingSink>& sink : sinks_) {
    FUZZ_CHECK(sink->ended(), sink->label(), " (", sink->id(), ") never ended");
    FUZZ_CHECK(sink->started() == sink->finished(), sink->label(),
               sink->started() ? " was admitted but failed" : " finished unadmitted");
  }
  for (const std::unique_ptr<ClientAbort>& abort : aborts_) {
    FUZZ_CHECK(abort->answers == 1, "Abort [", absl::StrJoin(abort->ids, ","),
               "] never answered");
  }
  FUZZ_CHECK(fixture_->core().in_flight() == 0, fixture_->core().in_flight(),
             " requests still in flight");
  for (int s = 0; s < fixture_->stages(); ++s) {
    FUZZ_CHECK(fixture_->core().pool(s).bindings() == 0, "stage ", s, " keeps ",
               fixture_->core().pool(s).bindings(), " bindings after everything ended");
  }
}

}  // namespace fuzz
}  // namespace omnistage
