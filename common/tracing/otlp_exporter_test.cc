#include "common/tracing/otlp_exporter.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest;

// Answers with the statuses it was given, in order, then OK; what it got is
// kept. With `hold`, every Send waits for it first.
class FakeTransport : public OtlpTransport {
 public:
  explicit FakeTransport(std::vector<absl::Status> answers = {}, absl::Notification* hold = nullptr)
      : answers_(std::move(answers)), hold_(hold) {}

  absl::Status Send(const std::string& request, absl::Duration) override {
    if (hold_ != nullptr) hold_->WaitForNotification();
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(requests_.emplace_back().ParseFromString(request));
    if (next_ < answers_.size()) return answers_[next_++];
    return absl::OkStatus();
  }
  std::string Describe() const override { return "fake"; }

  std::vector<ExportTraceServiceRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

 private:
  const std::vector<absl::Status> answers_;
  absl::Notification* const hold_;
  absl::Mutex mu_;
  size_t next_ = 0;
  std::vector<ExportTraceServiceRequest> requests_;
};

// An encoded span named `i`.
std::string NamedSpan(int i) {
  opentelemetry::proto::trace::v1::Span span;
  span.set_name(std::to_string(i));
  return span.SerializeAsString();
}

OtlpExportOptions Fast() {
  OtlpExportOptions options;
  options.delay = absl::Milliseconds(20);
  options.first_backoff = absl::Milliseconds(5);
  options.max_backoff = absl::Milliseconds(20);
  return options;
}

// Waits up to 10 s for `done`.
template <typename F>
bool Eventually(F done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

TEST(OtlpExporterTest, SendsBatchesWithTheResourceAndScope) {
  OtlpExportOptions options = Fast();
  options.max_batch = 3;
  auto* attribute = options.resource.add_attributes();
  attribute->set_key("service.name");
  attribute->mutable_value()->set_string_value("orchestrator");
  auto owned = std::make_unique<FakeTransport>();
  FakeTransport* transport = owned.get();
  OtlpExporter exporter(options, std::move(owned));
  for (int i = 0; i < 7; ++i) exporter.Export(NamedSpan(i));
  ASSERT_TRUE(Eventually([&] { return exporter.exported() == 7; }));
  EXPECT_EQ(exporter.dropped(), 0);
  std::vector<std::string> names;
  for (const ExportTraceServiceRequest& request : transport->requests()) {
    ASSERT_EQ(request.resource_spans_size(), 1);
    const auto& resource_spans = request.resource_spans(0);
    EXPECT_EQ(resource_spans.resource().attributes(0).value().string_value(), "orchestrator");
    ASSERT_EQ(resource_spans.scope_spans_size(), 1);
    EXPECT_EQ(resource_spans.scope_spans(0).scope().name(), "omnistage");
    EXPECT_LE(resource_spans.scope_spans(0).spans_size(), 3);
    for (const auto& span : resource_spans.scope_spans(0).spans()) names.push_back(span.name());
  }
  EXPECT_EQ(names, (std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6"}));
}

// A lone span waits no longer than the delay.
TEST(OtlpExporterTest, ASpanGoesOutWithinTheDelay) {
  OtlpExportOptions options = Fast();
  options.delay = absl::Milliseconds(50);
  OtlpExporter exporter(options, std::make_unique<FakeTransport>());
  absl::SleepFor(absl::Milliseconds(100));  // The thread waits on an empty queue.
  const absl::Time start = absl::Now();
  exporter.Export(NamedSpan(1));
  ASSERT_TRUE(Eventually([&] { return exporter.exported() == 1; }));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(OtlpExporterTest, ABatchTheCollectorCouldNotTakeIsSentAgain) {
  auto owned = std::make_unique<FakeTransport>(std::vector<absl::Status>{
      absl::UnavailableError("down"), absl::ResourceExhaustedError("busy")});
  FakeTransport* transport = owned.get();
  OtlpExporter exporter(Fast(), std::move(owned));
  exporter.Export(NamedSpan(1));
  ASSERT_TRUE(Eventually([&] { return exporter.exported() == 1; }));
  EXPECT_EQ(exporter.dropped(), 0);
  EXPECT_EQ(transport->requests().size(), 3u);
}

TEST(OtlpExporterTest, ABatchIsDroppedAfterItsLastAttemptOrARefusal) {
  OtlpExportOptions options = Fast();
  options.max_attempts = 3;
  auto owned =
      std::make_unique<FakeTransport>(std::vector<absl::Status>(3, absl::UnavailableError("down")));
  FakeTransport* transport = owned.get();
  OtlpExporter exporter(options, std::move(owned));
  exporter.Export(NamedSpan(1));
  exporter.Export(NamedSpan(2));
  ASSERT_TRUE(Eventually([&] { return exporter.dropped() == 2; }));
  EXPECT_EQ(transport->requests().size(), 3u);

  // A refusal is not tried again.
  auto refusing =
      std::make_unique<FakeTransport>(std::vector<absl::Status>{absl::InvalidArgumentError("bad")});
  FakeTransport* refused = refusing.get();
  OtlpExporter other(Fast(), std::move(refusing));
  other.Export(NamedSpan(1));
  ASSERT_TRUE(Eventually([&] { return other.dropped() == 1; }));
  other.Shutdown(absl::Seconds(1));
  EXPECT_EQ(refused->requests().size(), 1u);
  EXPECT_EQ(other.exported(), 0);
}

// A collector that does not answer never holds up Export: the queue fills
// and what does not fit is dropped and counted.
TEST(OtlpExporterTest, AStuckCollectorNeverBlocksTheCaller) {
  absl::Notification hold;
  OtlpExportOptions options = Fast();
  options.max_queue = 4;
  options.max_batch = 1;
  OtlpExporter exporter(options,
                        std::make_unique<FakeTransport>(std::vector<absl::Status>{}, &hold));
  const absl::Time start = absl::Now();
  for (int i = 0; i < 1000; ++i) exporter.Export(NamedSpan(i));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // At most the queue and the batch in flight are kept.
  EXPECT_GE(exporter.dropped(), 1000 - 5);
  hold.Notify();
  exporter.Shutdown(absl::Seconds(5));
  EXPECT_EQ(exporter.exported() + exporter.dropped(), 1000);
}

TEST(OtlpExporterTest, ShutdownSendsWhatIsQueued) {
  OtlpExportOptions options = Fast();
  options.delay = absl::Hours(1);
  OtlpExporter exporter(options, std::make_unique<FakeTransport>());
  for (int i = 0; i < 5; ++i) exporter.Export(NamedSpan(i));
  exporter.Shutdown(absl::Seconds(5));
  EXPECT_EQ(exporter.exported(), 5);
  // After it, spans are dropped.
  exporter.Export(NamedSpan(6));
  EXPECT_EQ(exporter.dropped(), 1);
}

// A collector that stays down does not hold shutdown past its deadline.
TEST(OtlpExporterTest, ShutdownEndsRetriesAtItsDeadline) {
  OtlpExportOptions options = Fast();
  options.first_backoff = absl::Seconds(30);
  options.max_backoff = absl::Seconds(30);
  OtlpExporter exporter(options, std::make_unique<FakeTransport>(std::vector<absl::Status>(
                                     100, absl::UnavailableError("down"))));
  exporter.Export(NamedSpan(1));
  absl::SleepFor(absl::Milliseconds(100));  // Its first attempt failed.
  const absl::Time start = absl::Now();
  exporter.Shutdown(absl::Milliseconds(200));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(exporter.dropped(), 1);
  EXPECT_EQ(exporter.exported(), 0);
}

}  // namespace
}  // namespace omnistage
