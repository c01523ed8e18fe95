#include "common/stream_writer.h"

#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "protos/common.pb.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Writer = StreamWriter<v1::TokenIds>;

v1::TokenIds Ids(std::vector<int32_t> ids) {
  v1::TokenIds m;
  for (int32_t id : ids) m.add_ids(id);
  return m;
}

std::string Show(const v1::TokenIds& m) {
  std::string out;
  for (int32_t id : m.ids()) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

// Records what the writer asks of the stream; the test completes writes by hand.
class RecordingTransport : public Writer::Transport {
 public:
  void BeginWrite(const v1::TokenIds* message) override {
    writes.push_back(Show(*message));
    ++in_flight;
  }
  void FinishStream(const absl::Status& status) override {
    finishes.push_back(status);
    EXPECT_EQ(in_flight, 0) << "finished with a write in flight";
  }
  void CancelStream() override { ++cancels; }
  void BeginWriteAndFinish(const v1::TokenIds* message, const absl::Status& status) override {
    EXPECT_EQ(in_flight, 0) << "a last write with a write in flight";
    writes.push_back(Show(*message) + " +end");
    finishes.push_back(status);
  }

  std::vector<std::string> writes;
  std::vector<absl::Status> finishes;
  int in_flight = 0;
  int cancels = 0;
};

class StreamWriterTest : public ::testing::Test {
 protected:
  void Complete(Writer& writer, bool ok = true) {
    ASSERT_EQ(transport_.in_flight, 1);
    --transport_.in_flight;
    writer.OnWriteDone(ok);
  }
  RecordingTransport transport_;
};

TEST_F(StreamWriterTest, OneWriteInFlightTheRestInOrder) {
  Writer writer(&transport_, {});
  EXPECT_TRUE(writer.Write(Ids({1})));
  EXPECT_TRUE(writer.Write(Ids({2})));
  EXPECT_TRUE(writer.Write(Ids({3})));
  EXPECT_THAT(transport_.writes, ElementsAre("1"));
  Complete(writer);
  EXPECT_THAT(transport_.writes, ElementsAre("1", "2"));
  Complete(writer);
  Complete(writer);
  EXPECT_THAT(transport_.writes, ElementsAre("1", "2", "3"));
  EXPECT_TRUE(transport_.finishes.empty());
}

TEST_F(StreamWriterTest, QueuedBytesAreReportedAsTheyComeAndGo) {
  int64_t queued = 0;
  std::vector<int64_t> deltas;
  Writer::Options options;
  options.on_queued_bytes = [&](int64_t delta) {
    queued += delta;
    deltas.push_back(delta);
  };
  Writer writer(&transport_, options);
  const int64_t two = static_cast<int64_t>(Ids({2}).ByteSizeLong());
  const int64_t three = static_cast<int64_t>(Ids({3, 4}).ByteSizeLong());
  EXPECT_TRUE(writer.Write(Ids({1})));  // In flight: not queued.
  EXPECT_EQ(queued, 0);
  EXPECT_TRUE(writer.Write(Ids({2})));
  EXPECT_TRUE(writer.Write(Ids({3, 4})));
  EXPECT_EQ(queued, two + three);
  Complete(writer);  // {1} done, {2} leaves the queue for the wire.
  EXPECT_EQ(queued, three);
  Complete(writer);  // {3,4} on the wire.
  EXPECT_EQ(queued, 0);
  EXPECT_TRUE(writer.Write(Ids({5})));
  EXPECT_TRUE(writer.Write(Ids({6})));
  EXPECT_EQ(queued, 2 * two);
  writer.Abandon(absl::CancelledError("gone"));  // Dropped: back to 0.
  EXPECT_EQ(queued, 0);
  EXPECT_THAT(deltas, ElementsAre(two, three, -two, -three, two, two, -2 * two));
}

TEST_F(StreamWriterTest, APeerTooSlowForTheByteBoundIsAbandoned) {
  int64_t queued = 0;
  Writer::Options options;
  options.label = "Generate stream";
  options.max_queued_bytes = 3 * Ids({1, 2}).ByteSizeLong();
  options.on_queued_bytes = [&](int64_t delta) { queued += delta; };
  Writer writer(&transport_, options);
  EXPECT_TRUE(writer.Write(Ids({0})));  // In flight.
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(writer.Write(Ids({1, 2})));
  EXPECT_FALSE(writer.Write(Ids({1, 2})));  // One more would pass the bound.
  EXPECT_EQ(transport_.cancels, 1);
  EXPECT_EQ(queued, 0);  // The queue was dropped.
  Complete(writer, /*ok=*/false);
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(transport_.finishes[0].message()),
              HasSubstr("Generate stream: the peer reads too slowly"));
  EXPECT_FALSE(writer.Write(Ids({3})));
}

TEST_F(StreamWriterTest, MergesWhatQueuedWithinTheWriteSize) {
  Writer::Options options;
  options.merge = [](v1::TokenIds& into, v1::TokenIds& next) {
    into.mutable_ids()->MergeFrom(next.ids());
    return true;
  };
  // Each one-id message of ids < 128 is 3 bytes; two ids together are 4.
  options.max_write_bytes = 7;
  Writer writer(&transport_, options);
  writer.Write(Ids({1}));
  writer.Write(Ids({2}));
  writer.Write(Ids({3}));
  writer.Write(Ids({4}));
  writer.Write(Ids({5, 6, 7, 8, 9, 10}));  // Larger than a write: goes alone.
  Complete(writer);
  Complete(writer);
  Complete(writer);
  EXPECT_THAT(transport_.writes, ElementsAre("1", "2,3", "4", "5,6,7,8,9,10"));
}

TEST_F(StreamWriterTest, AMessageTheMergeRefusesStartsTheNextWrite) {
  Writer::Options options;
  // Only odd ids join an odd write (as a worker merges step outputs but not
  // other events).
  options.merge = [](v1::TokenIds& into, v1::TokenIds& next) {
    if (into.ids(0) % 2 != next.ids(0) % 2) return false;
    into.mutable_ids()->MergeFrom(next.ids());
    return true;
  };
  options.max_write_bytes = 1 << 10;
  int64_t queued = 0;
  options.on_queued_bytes = [&](int64_t delta) { queued += delta; };
  Writer writer(&transport_, options);
  writer.Write(Ids({1}));
  writer.Write(Ids({3}));
  writer.Write(Ids({5}));
  writer.Write(Ids({2}));
  writer.Write(Ids({4}));
  writer.Write(Ids({7}));
  Complete(writer);
  Complete(writer);
  Complete(writer);
  EXPECT_THAT(transport_.writes, ElementsAre("1", "3,5", "2,4", "7"));
  EXPECT_EQ(queued, 0);
}

TEST_F(StreamWriterTest, EndFinishesOnceAfterTheQueueIsWritten) {
  Writer writer(&transport_, {});
  writer.Write(Ids({1}));
  writer.Write(Ids({2}));
  writer.End(absl::OkStatus());
  writer.End(absl::InternalError("second end loses"));
  EXPECT_FALSE(writer.Write(Ids({3}))) << "written after End";
  EXPECT_TRUE(transport_.finishes.empty());
  Complete(writer);
  EXPECT_TRUE(transport_.finishes.empty());
  Complete(writer);
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_TRUE(transport_.finishes[0].ok());
  EXPECT_THAT(transport_.writes, ElementsAre("1", "2"));
}

TEST_F(StreamWriterTest, EndWithNothingQueuedFinishesAtOnce) {
  Writer writer(&transport_, {});
  writer.End(absl::NotFoundError("no such thing"));
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kNotFound);
}

Writer::Options WritesAndFinishes() {
  Writer::Options options;
  options.write_and_finish = true;
  return options;
}

TEST_F(StreamWriterTest, ALastWriteOnAnIdleStreamCarriesItsEnd) {
  Writer writer(&transport_, WritesAndFinishes());
  EXPECT_TRUE(writer.WriteLast(Ids({1}), absl::OkStatus()));
  EXPECT_THAT(transport_.writes, ElementsAre("1 +end"));
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_TRUE(transport_.finishes[0].ok());
  EXPECT_FALSE(writer.Write(Ids({2}))) << "written after the end";
  EXPECT_FALSE(writer.WriteLast(Ids({3}), absl::OkStatus()));
  writer.End(absl::InternalError("ended already"));
  writer.Abandon(absl::InternalError("ended already"));
  EXPECT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.cancels, 0);
}

// Behind a write in flight, what queued goes out merged where the owner merges,
// and the write that empties the queue carries the end: after End too.
TEST_F(StreamWriterTest, TheWriteThatEmptiesTheQueueOfAnEndingStreamCarriesItsEnd) {
  Writer::Options options = WritesAndFinishes();
  options.merge = [](v1::TokenIds& into, v1::TokenIds& next) {
    into.mutable_ids()->MergeFrom(next.ids());
    return true;
  };
  options.max_write_bytes = 1 << 20;
  Writer writer(&transport_, options);
  writer.Write(Ids({1}));
  writer.Write(Ids({2}));
  EXPECT_TRUE(writer.WriteLast(Ids({3}), absl::NotFoundError("gone")));
  EXPECT_TRUE(transport_.finishes.empty());
  Complete(writer);
  EXPECT_THAT(transport_.writes, ElementsAre("1", "2,3 +end"));
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kNotFound);

  RecordingTransport other;
  Writer ended(&other, WritesAndFinishes());  // No merge: one message per write.
  ended.Write(Ids({4}));
  ended.Write(Ids({5}));
  ended.Write(Ids({6}));
  ended.End(absl::OkStatus());
  --other.in_flight;
  ended.OnWriteDone(true);
  --other.in_flight;
  ended.OnWriteDone(true);
  EXPECT_THAT(other.writes, ElementsAre("4", "5", "6 +end"));
  EXPECT_EQ(other.finishes.size(), 1u);
}

// A transport that cannot end with a write: WriteLast is Write, then End.
TEST_F(StreamWriterTest, WithoutWriteAndFinishALastWriteIsAWriteThenAnEnd) {
  Writer writer(&transport_, {});
  EXPECT_TRUE(writer.WriteLast(Ids({1}), absl::OkStatus()));
  EXPECT_THAT(transport_.writes, ElementsAre("1"));
  EXPECT_TRUE(transport_.finishes.empty());
  Complete(writer);
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_TRUE(transport_.finishes[0].ok());
}

Writer::Options Labeled(std::string label, size_t max_queued = 0) {
  Writer::Options options;
  options.label = std::move(label);
  options.max_queued = max_queued;
  return options;
}

TEST_F(StreamWriterTest, FailedWriteDropsTheQueueAndEndsCancelled) {
  Writer writer(&transport_, Labeled("session 7"));
  writer.Write(Ids({1}));
  writer.Write(Ids({2}));
  Complete(writer, /*ok=*/false);
  EXPECT_THAT(transport_.writes, ElementsAre("1"));
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(transport_.finishes[0].message(), HasSubstr("session 7"));
  EXPECT_TRUE(writer.ending());
}

TEST_F(StreamWriterTest, PeerThatStopsReadingIsCancelledThenFinished) {
  Writer writer(&transport_, Labeled("session 7", 2));
  EXPECT_TRUE(writer.Write(Ids({1})));  // In flight, never completed by the peer.
  EXPECT_TRUE(writer.Write(Ids({2})));
  EXPECT_TRUE(writer.Write(Ids({3})));
  EXPECT_FALSE(writer.Write(Ids({4})));
  EXPECT_EQ(transport_.cancels, 1);
  EXPECT_TRUE(transport_.finishes.empty()) << "finished with a write in flight";
  Complete(writer, /*ok=*/false);  // The cancel fails the stuck write.
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(transport_.finishes[0].message(), HasSubstr("session 7: the peer is not reading"));
  EXPECT_THAT(transport_.writes, ElementsAre("1"));
}

TEST_F(StreamWriterTest, AbandonWithNoWriteInFlightFinishesAtOnce) {
  Writer writer(&transport_, {});
  writer.Abandon(absl::ResourceExhaustedError("too slow"));
  EXPECT_EQ(transport_.cancels, 1);
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].message(), "too slow");
  writer.Abandon(absl::InternalError("again"));
  EXPECT_EQ(transport_.finishes.size(), 1u);
}

// A transport whose writes complete inside BeginWrite, as gRPC may do.
class InlineTransport : public Writer::Transport {
 public:
  void BeginWrite(const v1::TokenIds* message) override {
    writes.push_back(Show(*message));
    writer->OnWriteDone(true);
  }
  void FinishStream(const absl::Status& status) override { ++finishes; }
  void CancelStream() override {}

  Writer* writer = nullptr;
  std::vector<std::string> writes;
  int finishes = 0;
};

TEST(StreamWriterInlineTest, WritesCompletingInlineKeepOrderAndFinishOnce) {
  InlineTransport transport;
  Writer writer(&transport, {});
  transport.writer = &writer;
  writer.Write(Ids({1}));
  writer.Write(Ids({2}));
  writer.End(absl::OkStatus());
  EXPECT_THAT(transport.writes, ElementsAre("1", "2"));
  EXPECT_EQ(transport.finishes, 1);
}

// Writers on several threads, completions on another: every message is written
// once, each thread's in its order, and the stream finishes once.
class ThreadedTransport : public Writer::Transport {
 public:
  void BeginWrite(const v1::TokenIds* message) override {
    absl::MutexLock lock(&mu);
    writes.push_back(message->ids(0));
    pending = true;
  }
  void FinishStream(const absl::Status& status) override {
    absl::MutexLock lock(&mu);
    ++finishes;
  }
  void CancelStream() override {}

  absl::Mutex mu;
  std::vector<int32_t> writes ABSL_GUARDED_BY(mu);
  bool pending ABSL_GUARDED_BY(mu) = false;
  int finishes ABSL_GUARDED_BY(mu) = 0;
};

TEST(StreamWriterThreadsTest, ConcurrentWritersAndCompletions) {
  constexpr int kThreads = 4, kEach = 2000;
  ThreadedTransport transport;
  Writer writer(&transport, {});
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&writer, t] {
      for (int i = 0; i < kEach; ++i) writer.Write(Ids({t * kEach + i}));
    });
  }
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop) {
      bool pending;
      {
        absl::MutexLock lock(&transport.mu);
        pending = transport.pending;
        transport.pending = false;
      }
      if (pending) writer.OnWriteDone(true);
      if (!pending) std::this_thread::yield();
    }
  });
  for (std::thread& t : threads) t.join();
  writer.End(absl::OkStatus());
  while (true) {
    absl::MutexLock lock(&transport.mu);
    if (transport.finishes > 0) break;
  }
  stop = true;
  completer.join();
  absl::MutexLock lock(&transport.mu);
  EXPECT_EQ(transport.finishes, 1);
  ASSERT_EQ(transport.writes.size(), static_cast<size_t>(kThreads * kEach));
  std::vector<int32_t> last(kThreads, -1);
  for (int32_t id : transport.writes) {
    const int t = id / kEach;
    EXPECT_GT(id, last[t]) << "thread " << t << " out of order";
    last[t] = id;
  }
}

}  // namespace
}  // namespace omnistage
