#include "common/tracing/otlp_exporter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace omnistage {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;

OtlpExporter::OtlpExporter(OtlpExportOptions options, std::unique_ptr<OtlpTransport> transport)
    : options_(std::move(options)), transport_(std::move(transport)) {
  thread_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() { Shutdown(options_.final_flush); }

void OtlpExporter::Export(Span span) {
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
    std::deque<Span> batch;
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
    Send(std::move(batch), give_up);
  }
}

void OtlpExporter::Send(std::deque<Span> batch, absl::Time give_up) {
  const int64_t n = static_cast<int64_t>(batch.size());
  ExportTraceServiceRequest request;
  auto* resource_spans = request.add_resource_spans();
  *resource_spans->mutable_resource() = options_.resource;
  auto* scope_spans = resource_spans->add_scope_spans();
  scope_spans->mutable_scope()->set_name(options_.scope_name);
  scope_spans->mutable_spans()->Reserve(static_cast<int>(n));
  for (Span& span : batch) *scope_spans->add_spans() = std::move(span);
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
