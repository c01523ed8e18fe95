// OtlpExporter: spans leave the process in batches, on a thread of their
// own, so that no request waits for a collector (docs/observability.md,
// "Traces"). Export() only queues: a full queue drops the span and counts
// it. The thread sends a batch when max_batch spans wait or `delay` passed
// since the first of them, through an OtlpTransport (gRPC or HTTP/protobuf);
// a batch the collector could not take now (UNAVAILABLE, ...) is tried again
// after a backoff that doubles up to max_backoff, up to max_attempts times,
// then dropped and counted. Shutdown() sends what is queued, within a
// deadline. Spans come encoded (Span::End) and a batch is framed into an
// ExportTraceServiceRequest around them, nothing decoded (otlp_wire.h).
//
//   OtlpExporter exporter(options, std::move(transport));
//   exporter.Export(span.End(absl::Now()));  // any thread, never blocks on I/O
//   exporter.Shutdown(absl::Seconds(5));
//
// Thread-safe.
#ifndef OMNISTAGE_COMMON_TRACING_OTLP_EXPORTER_H_
#define OMNISTAGE_COMMON_TRACING_OTLP_EXPORTER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/tracing/otlp_transport.h"
#include "protos/otlp/trace_service.pb.h"

namespace omnistage {

struct OtlpExportOptions {
  // What emits the spans (service.name, ...) and what produced them.
  opentelemetry::proto::resource::v1::Resource resource;
  std::string scope_name = "omnistage";
  // OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
  // OTEL_BSP_SCHEDULE_DELAY, OTEL_EXPORTER_OTLP_TIMEOUT.
  size_t max_queue = 2048;
  size_t max_batch = 512;
  absl::Duration delay = absl::Seconds(5);
  absl::Duration timeout = absl::Seconds(10);
  absl::Duration first_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(30);
  int max_attempts = 5;
  // How long the destructor lets the last spans go out (a collector that is
  // down must not hold up a process's exit).
  absl::Duration final_flush = absl::Seconds(2);
};

class OtlpExporter {
 public:
  OtlpExporter(OtlpExportOptions options, std::unique_ptr<OtlpTransport> transport);
  // Shutdown() with a deadline of options.final_flush, if not called before.
  ~OtlpExporter();
  OtlpExporter(const OtlpExporter&) = delete;
  OtlpExporter& operator=(const OtlpExporter&) = delete;

  // Queues `span` (an encoded opentelemetry.proto.trace.v1.Span), or drops
  // it (counted) when the queue is full or the exporter shut down.
  void Export(std::string span);
  // Sends what is queued (retrying within `deadline`), then stops the
  // thread; what could not be sent is dropped and counted.
  void Shutdown(absl::Duration deadline);

  // Whether the queue is full (a span exported now would be dropped): a
  // tracer records nothing meanwhile, counting each span it did not record
  // with NotRecorded(), so that a collector that is down costs no more than
  // the spans' contexts.
  bool full() const { return full_.load(std::memory_order_relaxed); }
  void NotRecorded() { dropped_.fetch_add(1, std::memory_order_relaxed); }

  // Spans the collector took, and spans dropped (a full queue, a batch
  // given up on, one refused, one not recorded).
  int64_t exported() const { return exported_.load(std::memory_order_relaxed); }
  int64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const OtlpTransport& transport() const { return *transport_; }

 private:
  void Run();
  // Sends `batch`, retrying what may succeed later, until `give_up`.
  void Send(const std::deque<std::string>& batch, absl::Time give_up);
  // The ExportTraceServiceRequest that carries `batch`.
  std::string Request(const std::deque<std::string>& batch) const;
  bool BatchDue() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OtlpExportOptions options_;
  // The ResourceSpans' resource and the ScopeSpans' scope, encoded once.
  const std::string resource_;
  const std::string scope_;
  const std::unique_ptr<OtlpTransport> transport_;
  std::atomic<int64_t> exported_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<bool> full_{false};
  // The last export failed (the thread's own: logged once per failing
  // spell).
  bool failing_ = false;

  absl::Mutex mu_;
  std::deque<std::string> queue_ ABSL_GUARDED_BY(mu_);
  // When the oldest queued span came.
  absl::Time oldest_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Past this, the thread sends no more (Shutdown's deadline).
  absl::Time stop_by_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread thread_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_TRACING_OTLP_EXPORTER_H_
