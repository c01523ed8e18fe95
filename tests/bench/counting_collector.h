// CountingCollector: an OTLP/gRPC trace collector for benchmarks that counts
// the spans it is sent without decoding them into messages (a walk over the
// wire format: ExportTraceServiceRequest.resource_spans -> scope_spans ->
// spans), so that the collector, sharing the machine with what it measures,
// costs as little as a collector can. Any method is answered OK.
//
//   CountingCollector collector;
//   ... --otlp_traces_endpoint=collector.endpoint() --otlp_protocol=grpc ...
//   int64_t spans = collector.spans();
#ifndef OMNISTAGE_TESTS_BENCH_COUNTING_COLLECTOR_H_
#define OMNISTAGE_TESTS_BENCH_COUNTING_COLLECTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/grpcpp.h"

namespace omnistage {
namespace bench {

class CountingCollector : public grpc::CallbackGenericService {
 public:
  CountingCollector();
  ~CountingCollector() override;

  // "http://127.0.0.1:<port>" (plaintext gRPC).
  std::string endpoint() const;
  int64_t spans() const { return spans_.load(std::memory_order_relaxed); }

  // The spans an ExportTraceServiceRequest's bytes hold; -1 when malformed.
  static int64_t CountSpans(absl::string_view request);

  grpc::ServerGenericBidiReactor* CreateReactor(
      grpc::GenericCallbackServerContext* context) override;

 private:
  std::atomic<int64_t> spans_{0};
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace bench
}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_BENCH_COUNTING_COLLECTOR_H_
