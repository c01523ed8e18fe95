#include "tests/bench/load_generator.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/limits.h"
#include "common/production_stamp.h"

namespace omnistage {
namespace bench {

int64_t NowNs() { return MonotonicNowNs(); }

std::shared_ptr<grpc::Channel> ConnectLoopback(int port, absl::Duration timeout) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(kMaxReceivedResponseBytes);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout))) return nullptr;
  return channel;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * values.size()));
  rank = std::min(std::max<size_t>(rank, 1), values.size());
  std::nth_element(values.begin(), values.begin() + (rank - 1), values.end());
  return values[rank - 1];
}

std::string Spread(const std::vector<double>& values, int decimals) {
  if (values.empty()) return "-";
  std::string per_run;
  for (double v : values) {
    absl::StrAppend(&per_run, per_run.empty() ? "" : " ", absl::StrFormat("%.*f", decimals, v));
  }
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return absl::StrCat(per_run, "  (", absl::StrFormat("%.*f", decimals, *lo), "..",
                      absl::StrFormat("%.*f", decimals, *hi), ")");
}

// One Generate call. Its callbacks are serialized by gRPC (one read in flight),
// so the plain members are owned by them; the atomics are read by Views().
class StreamGroup::Stream final : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  Stream(StreamGroup* group, int slot, v1::GenerateRequest request)
      : group_(group), slot_(slot), request_(std::move(request)) {}

  int slot() const { return slot_; }

  void Go(v1::Orchestrator::Stub* stub) {
    start_ns_ = NowNs();
    stub->async()->Generate(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The stream ended; OnDone follows.
    const int64_t now = NowNs();
    int n = 0;
    for (const v1::OutputChunk& chunk : response_.outputs()) {
      n += chunk.payload().tokens().ids_size();
      if (std::optional<int64_t> stamp = StampOf(chunk.payload())) {
        one_way_us_.push_back((now - *stamp) / 1e3);
      }
    }
    bool progress = false;
    if (n > 0) {
      if (first_token_ns_.load(std::memory_order_relaxed) == 0) {
        first_token_ns_.store(now);
        progress = true;
      } else {
        gaps_us_.push_back((now - last_arrival_ns_) / 1e3);
      }
      for (int i = 1; i < n; ++i) gaps_us_.push_back(0);
      last_arrival_ns_ = now;
      tokens_.fetch_add(n);
      ++messages_;
    }
    if (response_.has_terminal() && terminal_ns_.load() == 0) {
      finish_reason_.store(response_.terminal().finish_reason());
      if (response_.terminal().has_error())
        error_replica_.store(response_.terminal().error().replica());
      error_message_ = response_.terminal().error().message();
      terminal_ns_.store(now);
      progress = true;
    }
    if (progress) group_->OnProgress();
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    status_ = status;
    end_ns_ = NowNs();
    done_.store(true);
    group_->OnStreamDone(this);  // Last touch of `this` by gRPC.
  }

  StreamView View() const {
    StreamView view;
    view.request_id = request_.request_id();
    view.start_ns = start_ns_.load();
    view.first_token_ns = first_token_ns_.load();
    view.terminal_ns = terminal_ns_.load();
    view.tokens = tokens_.load();
    view.finish_reason = static_cast<v1::FinishReason>(finish_reason_.load());
    view.error_replica = error_replica_.load();
    view.done = done_.load();
    return view;
  }

  // Read by the group in OnStreamDone, after the last callback.
  bool failed() const {
    const int reason = finish_reason_.load();
    return !status_.ok() ||
           (reason != v1::FINISH_REASON_STOP && reason != v1::FINISH_REASON_LENGTH);
  }
  std::string Describe() const {
    return absl::StrCat("status ", status_.error_code(), " '", status_.error_message(),
                        "', finish_reason ", finish_reason_.load(), " '", error_message_, "'");
  }
  int64_t end_ns() const { return end_ns_; }
  int64_t messages() const { return messages_; }
  std::vector<double> TakeGaps() { return std::move(gaps_us_); }
  std::vector<double> TakeOneWay() { return std::move(one_way_us_); }

 private:
  StreamGroup* const group_;
  const int slot_;
  const v1::GenerateRequest request_;
  grpc::ClientContext context_;
  v1::GenerateResponse response_;

  std::atomic<int64_t> start_ns_{0};
  std::atomic<int64_t> first_token_ns_{0};
  std::atomic<int64_t> terminal_ns_{0};
  std::atomic<int64_t> tokens_{0};
  std::atomic<int> finish_reason_{v1::FINISH_REASON_UNSPECIFIED};
  std::atomic<int> error_replica_{-1};
  std::atomic<bool> done_{false};

  int64_t last_arrival_ns_ = 0;
  int64_t messages_ = 0;
  int64_t end_ns_ = 0;
  std::vector<double> gaps_us_;
  std::vector<double> one_way_us_;
  std::string error_message_;
  grpc::Status status_;
};

StreamGroup::StreamGroup(std::shared_ptr<v1::Orchestrator::Stub> stub, LoadOptions options)
    : stub_(std::move(stub)), options_(std::move(options)) {}

StreamGroup::~StreamGroup() {
  CancelAll();
  if (!WaitDone(absl::Seconds(20))) {
    std::fprintf(stderr, "pipeline_benchmark: streams did not end after cancellation\n");
    std::_Exit(3);
  }
}

void StreamGroup::Start() {
  {
    absl::MutexLock lock(&mu_);
    started_ns_ = NowNs();
  }
  for (int slot = 0; slot < options_.streams; ++slot) Launch(slot, /*reserved=*/false);
}

void StreamGroup::Launch(int slot, bool reserved) {
  Stream* stream;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      if (reserved) --running_;
      return;
    }
    auto owned = std::make_unique<Stream>(this, slot, options_.make_request(slot, next_seq_++));
    stream = owned.get();
    streams_.push_back(std::move(owned));
    if (!reserved) ++running_;
  }
  stream->Go(stub_.get());
}

void StreamGroup::OnProgress() {
  absl::MutexLock lock(&mu_);
  ++progress_;  // Unlocking re-evaluates the waiters' conditions.
}

void StreamGroup::OnStreamDone(Stream* stream) {
  std::vector<double> gaps = stream->TakeGaps();
  std::vector<double> one_way = stream->TakeOneWay();
  const StreamView view = stream->View();
  bool again = false;
  {
    absl::MutexLock lock(&mu_);
    --running_;
    ++progress_;
    last_end_ns_ = std::max(last_end_ns_, stream->end_ns());
    ++result_.requests;
    result_.tokens += view.tokens;
    result_.messages += stream->messages();
    if (view.first_token_ns != 0) {
      result_.ttft_us.push_back((view.first_token_ns - view.start_ns) / 1e3);
    }
    result_.gap_us.insert(result_.gap_us.end(), gaps.begin(), gaps.end());
    result_.one_way_us.insert(result_.one_way_us.end(), one_way.begin(), one_way.end());
    if (stream->failed()) {
      if (result_.failed++ == 0) result_.first_error = stream->Describe();
    }
    again = !stopping_ && options_.run_for > absl::ZeroDuration() &&
            NowNs() - started_ns_ < absl::ToInt64Nanoseconds(options_.run_for);
    if (again) ++running_;  // Reserved for the relaunch, so WaitDone cannot end before it.
  }
  if (again) Launch(stream->slot(), /*reserved=*/true);
}

bool StreamGroup::WaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_ == 0;  // Relaunches are counted before the lock drops.
  };
  return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
}

bool StreamGroup::WaitAllHaveTokens(absl::Duration timeout) {
  return WaitUntil(
      [](const std::vector<StreamView>& views) {
        for (const StreamView& v : views) {
          if (v.first_token_ns == 0 && !v.done) return false;
        }
        return true;
      },
      timeout);
}

bool StreamGroup::WaitTerminal(size_t index, absl::Duration timeout) {
  return WaitUntil(
      [index](const std::vector<StreamView>& views) {
        return index < views.size() && (views[index].terminal_ns != 0 || views[index].done);
      },
      timeout);
}

bool StreamGroup::WaitUntil(const std::function<bool(const std::vector<StreamView>&)>& predicate,
                            absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    uint64_t seen;
    {
      absl::MutexLock lock(&mu_);
      seen = progress_;
    }
    if (predicate(Views())) return true;
    absl::MutexLock lock(&mu_);
    auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return progress_ != seen; };
    if (!mu_.AwaitWithDeadline(absl::Condition(&changed), deadline)) return false;
  }
}

void StreamGroup::CancelAll() {
  std::vector<Stream*> running;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    for (const std::unique_ptr<Stream>& s : streams_) running.push_back(s.get());
  }
  // Streams are never freed before the group, and cancelling an ended call is a no-op.
  for (Stream* s : running) s->Cancel();
}

std::vector<StreamView> StreamGroup::Views() const {
  std::vector<const Stream*> streams;
  {
    absl::MutexLock lock(&mu_);
    for (const std::unique_ptr<Stream>& s : streams_) streams.push_back(s.get());
  }
  std::vector<StreamView> views;
  views.reserve(streams.size());
  for (const Stream* s : streams) views.push_back(s->View());
  return views;
}

LoadResult StreamGroup::Result() const {
  absl::MutexLock lock(&mu_);
  LoadResult result = result_;
  result.seconds = last_end_ns_ > started_ns_ ? (last_end_ns_ - started_ns_) / 1e9 : 0;
  return result;
}

}  // namespace bench
}  // namespace omnistage
