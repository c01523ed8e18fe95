#include "common/tracing/otlp_exporter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/tracing/otlp_wire.h"

namespace omnistage {
namespace {

// Field numbers (protos/otlp/trace_service.proto, trace.proto, common.proto):
// ExportTraceServiceRequest.resource_spans, ResourceSpans.resource and
// .scope_spans, ScopeSpans.scope and .spans, InstrumentationScope.name.
constexpr int kResourceSpans = 1;
constexpr int kResource = 1;
constexpr int kScopeSpans = 2;
constexpr int kScope = 1;
constexpr int kSpans = 2;
constexpr int kScopeName = 1;

std::string EncodedScope(absl::string_view name) {
  std::string scope;
  AppendBytesField(&scope, kScopeName, name);
  return scope;
}

}  // namespace

OtlpExporter::OtlpExporter(OtlpExportOptions options, std::unique_ptr<OtlpTransport> transport)
    : options_(std::move(options)),
      resource_(options_.resource.SerializeAsString()),
      scope_(EncodedScope(options_.scope_name)),
      transport_(std::move(transport)) {
  thread_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() { Shutdown(options_.final_flush); }

void OtlpExporter::Export(std::string span) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= options_.max_queue) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (queue_.empty()) oldest_ = absl::Now();
  queue_.push_back(std::move(span));
  if (queue_.size() >= options_.max_queue) full_.store(true, std::memory_order_relaxed);
}

void OtlpExporter::Shutdown(absl::Duration deadline) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      stopping_ = true;
      stop_by_ = absl::Now() + deadline;
    }
  }
  if (thread_.joinable()) thread_.join();
}

bool OtlpExporter::BatchDue() const {
  return queue_.size() >= options_.max_batch ||
         (!queue_.empty() && absl::Now() >= oldest_ + options_.delay);
}

void OtlpExporter::Run() {
  for (;;) {
    std::deque<std::string> batch;
    absl::Time give_up = absl::InfiniteFuture();
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && !BatchDue()) {
        if (queue_.empty()) {
          // The first span starts the delay.
          mu_.Await(absl::Condition(
              +[](OtlpExporter* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                return self->stopping_ || !self->queue_.empty();
              },
              this));
          continue;
        }
        mu_.AwaitWithTimeout(absl::Condition(
                                 +[](OtlpExporter* self) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                   return self->stopping_ ||
                                          self->queue_.size() >= self->options_.max_batch;
                                 },
                                 this),
                             oldest_ + options_.delay - absl::Now());
      }
      if (queue_.empty()) return;  // Stopping, and nothing left.
      if (stopping_ && absl::Now() >= stop_by_) {
        dropped_.fetch_add(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
        queue_.clear();
        return;
      }
      const size_t n = std::min(queue_.size(), options_.max_batch);
      batch.assign(std::make_move_iterator(queue_.begin()),
                   std::make_move_iterator(queue_.begin() + static_cast<ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<ptrdiff_t>(n));
      full_.store(queue_.size() >= options_.max_queue, std::memory_order_relaxed);
      if (!queue_.empty()) oldest_ = absl::Now();
      if (stopping_) give_up = stop_by_;
    }
    Send(batch, give_up);
  }
}

std::string OtlpExporter::Request(const std::deque<std::string>& batch) const {
  size_t scope_spans = BytesFieldSize(scope_.size());
  for (const std::string& span : batch) scope_spans += 1 + VarintSize(span.size()) + span.size();
  const size_t resource_spans =
      BytesFieldSize(resource_.size()) + 1 + VarintSize(scope_spans) + scope_spans;
  std::string request;
  request.reserve(1 + VarintSize(resource_spans) + resource_spans);
  AppendLengthPrefix(&request, kResourceSpans, resource_spans);
  AppendBytesField(&request, kResource, resource_);
  AppendLengthPrefix(&request, kScopeSpans, scope_spans);
  AppendBytesField(&request, kScope, scope_);
  for (const std::string& span : batch) AppendBytesField(&request, kSpans, span);
  return request;
}

void OtlpExporter::Send(const std::deque<std::string>& batch, absl::Time give_up) {
  const int64_t n = static_cast<int64_t>(batch.size());
  const std::string request = Request(batch);
  absl::Duration backoff = options_.first_backoff;
  absl::Status status;
  for (int attempt = 1; attempt <= options_.max_attempts; ++attempt) {
    const absl::Duration left = give_up - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    status = transport_->Send(request, std::min(options_.timeout, left));
    if (status.ok()) {
      exported_.fetch_add(n, std::memory_order_relaxed);
      if (failing_) {
        failing_ = false;
        LogInfo(absl::StrCat("trace export to ", transport_->Describe(), " works again"));
      }
      return;
    }
    if (!RetryableExportError(status) || attempt == options_.max_attempts) break;
    if (!failing_) {
      failing_ = true;
      LogWarning(absl::StrCat("trace export to ", transport_->Describe(), " failed (",
                              status.ToString(),
                              "): retrying with backoff; spans queue meanwhile, dropped when ",
                              options_.max_queue, " wait"));
    }
    // The backoff, cut short by a shutdown (whose deadline then bounds
    // the retries).
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), std::min(backoff, give_up - absl::Now()));
    if (stopping_) give_up = std::min(give_up, stop_by_);
    backoff = std::min(backoff * 2, options_.max_backoff);
  }
  dropped_.fetch_add(n, std::memory_order_relaxed);
  if (!failing_) {
    failing_ = true;
    LogWarning(absl::StrCat("trace export to ", transport_->Describe(), " dropped ", n,
                            " span(s): ", status.ok() ? "out of time" : status.ToString()));
  }
}

}  // namespace omnistage
