#include "tests/bench/baseline_server.h"

#include <functional>
#include <memory>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "common/grpc/service_process.h"
#include "common/host_port.h"
#include "common/listening_line.h"
#include "common/production_stamp.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/load_generator.h"

namespace omnistage {
namespace bench {
namespace {

// Runs callbacks at their due time on one thread it owns (joined in the
// destructor). Callbacks run without the lock held.
class Pacer {
 public:
  Pacer() : thread_([this] { Loop(); }) {}
  ~Pacer() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  void At(int64_t due_ns, std::function<void()> callback) {
    absl::MutexLock lock(&mu_);
    queue_.push(Entry{due_ns, next_++, std::move(callback)});
  }

 private:
  struct Entry {
    int64_t due_ns;
    uint64_t order;  // FIFO among equal due times.
    std::function<void()> callback;
    bool operator>(const Entry& other) const {
      return due_ns != other.due_ns ? due_ns > other.due_ns : order > other.order;
    }
  };

  void Loop() {
    std::vector<std::function<void()>> due;
    absl::MutexLock lock(&mu_);
    while (!stop_) {
      const int64_t now = NowNs();
      if (queue_.empty()) {
        auto wake = [this]()
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&wake));
        continue;
      }
      if (queue_.top().due_ns > now) {
        const uint64_t next = next_;
        auto wake = [this, next]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return stop_ || next_ != next;  // Stopping, or an entry was added.
        };
        mu_.AwaitWithTimeout(absl::Condition(&wake), absl::Nanoseconds(queue_.top().due_ns - now));
        continue;
      }
      while (!queue_.empty() && queue_.top().due_ns <= now) {
        due.push_back(std::move(const_cast<Entry&>(queue_.top()).callback));
        queue_.pop();
      }
      mu_.Unlock();
      for (std::function<void()>& callback : due) callback();
      due.clear();
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // Last: starts after everything above exists.
};

// One Generate call. Tokens are "released" (all at once without pacing, one per
// pace tick otherwise) and written one at a time. The reactor finishes only when
// no write is in flight and no tick is pending, so OnDone (which deletes it)
// never races the pacer.
class BaselineStream final : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  BaselineStream(const v1::GenerateRequest& request, Pacer* pacer) : pacer_(pacer) {
    response_.set_request_id(request.request_id().empty() ? "baseline" : request.request_id());
    if (request.stage_params_size() > 0) {
      const v1::StageParameters& params = request.stage_params(0);
      if (params.has_max_tokens()) total_ = static_cast<int>(params.max_tokens());
      auto pace = params.extra().find("pace_us");
      if (pace != params.extra().end()) (void)absl::SimpleAtoi(pace->second, &pace_ns_);
      pace_ns_ *= 1000;
      auto stamp = params.extra().find("stamp");
      stamp_ = stamp != params.extra().end() && stamp->second == "1";
    }
    Action action;
    bool schedule = false;
    {
      absl::MutexLock lock(&mu_);
      if (pace_ns_ <= 0) {
        released_ = total_;
      } else {
        scheduled_ = schedule = true;
      }
      action = NextLocked();
    }
    if (schedule) pacer_->At(NowNs() + pace_ns_, [this] { Tick(); });
    Do(action);
  }

  void OnWriteDone(bool ok) override {
    Action action;
    {
      absl::MutexLock lock(&mu_);
      writing_ = false;
      if (!ok) failed_ = true;
      action = NextLocked();
    }
    Do(action);
  }

  void OnDone() override { delete this; }

 private:
  enum class Action { kNone, kWriteToken, kWriteTerminal, kFinishCancelled };

  void Tick() {
    Action action;
    bool schedule = false;
    {
      absl::MutexLock lock(&mu_);
      scheduled_ = false;
      ++released_;
      if (released_ < total_ && !failed_) scheduled_ = schedule = true;
      action = NextLocked();
    }
    if (schedule) pacer_->At(NowNs() + pace_ns_, [this] { Tick(); });
    Do(action);
  }

  Action NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finishing_) return Action::kNone;
    if (failed_) {
      if (scheduled_) return Action::kNone;  // The pending tick finishes it.
      finishing_ = true;
      return Action::kFinishCancelled;
    }
    if (written_ < released_ && written_ < total_) {
      writing_ = true;
      ++written_;
      return Action::kWriteToken;
    }
    if (written_ >= total_) {
      writing_ = finishing_ = true;
      return Action::kWriteTerminal;
    }
    return Action::kNone;
  }

  // The response is only touched here, and only one write is ever in flight.
  void Do(Action action) {
    switch (action) {
      case Action::kNone:
        return;
      case Action::kWriteToken: {
        response_.clear_outputs();
        v1::OutputChunk* chunk = response_.add_outputs();
        chunk->set_modality(v1::MODALITY_TOKENS);
        chunk->mutable_payload()->mutable_tokens()->add_ids(++token_);
        if (stamp_) {
          // Its emit time, as a stage worker stamps a step's outputs.
          v1::OutputChunk* stamp = response_.add_outputs();
          stamp->set_modality(v1::MODALITY_TOKENS);
          *stamp->mutable_payload() = StampPayload(MonotonicNowNs());
        }
        StartWrite(&response_);
        return;
      }
      case Action::kWriteTerminal:
        response_.clear_outputs();
        response_.mutable_terminal()->set_finish_reason(v1::FINISH_REASON_STOP);
        StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
        return;
      case Action::kFinishCancelled:
        Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
        return;
    }
  }

  Pacer* const pacer_;
  int total_ = 200;
  int64_t pace_ns_ = 0;
  bool stamp_ = false;  // extra["stamp"] == "1": a production stamp per token
  int32_t token_ = 0;
  v1::GenerateResponse response_;

  absl::Mutex mu_;
  int released_ ABSL_GUARDED_BY(mu_) = 0;
  int written_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool scheduled_ ABSL_GUARDED_BY(mu_) = false;
  bool failed_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
};

class BaselineService final : public v1::Orchestrator::CallbackService {
 public:
  explicit BaselineService(Pacer* pacer) : pacer_(pacer) {}

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext* context, const v1::GenerateRequest* request) override {
    return new BaselineStream(*request, pacer_);
  }

 private:
  Pacer* const pacer_;
};

}  // namespace

v1::GenerateRequest BaselineRequest(const std::string& request_id, uint32_t tokens,
                                    int64_t pace_us, bool stamp) {
  v1::GenerateRequest request;
  request.set_request_id(request_id);
  request.set_prompt("benchmark prompt");
  v1::StageParameters* params = request.add_stage_params();
  params->set_stage_id(0);
  params->set_max_tokens(tokens);
  if (pace_us > 0) (*params->mutable_extra())["pace_us"] = std::to_string(pace_us);
  if (stamp) (*params->mutable_extra())["stamp"] = "1";
  return request;
}

int RunBaselineServer() {
  StopSignals signals;

  auto pacer = std::make_unique<Pacer>();
  BaselineService service(pacer.get());
  absl::StatusOr<StartedServer> server = StartGrpcServer(GrpcServerOptions(), {&service});
  if (!server.ok()) return StartRefused("baseline", server.status().message());
  PrintListeningLine({server->port, FormatHostPort("127.0.0.1", server->port), {}});
  signals.Wait();
  // Paced streams need the pacer to reach their end, so it stops after the server.
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->server.reset();
  pacer.reset();
  return 0;
}

}  // namespace bench
}  // namespace omnistage
