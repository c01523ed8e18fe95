// GrpcWorkerStub against an in-process worker that streams events as fast as the
// transport takes them: reads wait for the loop (flow control reaches the
// worker), every event still arrives in order, and shutting down with events
// waiting for a loop that will never run them returns.
#include "orchestrator/replicas/grpc_worker_stub.h"

#include <atomic>
#include <deque>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc/grpc_util.h"
#include "gtest/gtest.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {
namespace {

constexpr int kEvents = 200;
constexpr int kOutputsPerEvent = 1000;

// Holds posted tasks until the test runs them. Thread-safe.
class HeldScheduler : public Scheduler {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void Post(std::function<void()> task) override {
    absl::MutexLock lock(&mu_);
    tasks_.push_back(std::move(task));
  }
  TimerId PostAt(absl::Time, std::function<void()> task) override {
    Post(std::move(task));
    return 0;
  }
  void Cancel(TimerId) override {}
  bool InLoop() const override { return true; }

  // Runs what is queued now (tasks may post more); returns how many ran.
  int RunPending() {
    std::deque<std::function<void()>> batch;
    {
      absl::MutexLock lock(&mu_);
      batch.swap(tasks_);
    }
    for (auto& task : batch) task();
    return static_cast<int>(batch.size());
  }
  size_t pending() {
    absl::MutexLock lock(&mu_);
    return tasks_.size();
  }
  void Drop() {
    absl::MutexLock lock(&mu_);
    tasks_.clear();
  }

 private:
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
};

// A worker whose Connect writes kEvents events of kOutputsPerEvent outputs (1 KiB
// each) back to back, then ends the stream.
class FloodingWorker : public v1::StageWorker::CallbackService {
 public:
  std::atomic<int> writes_done{0};

  grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* Connect(
      grpc::CallbackServerContext*) override {
    return new Flood(this);
  }

 private:
  class Flood : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent> {
   public:
    explicit Flood(FloodingWorker* worker) : worker_(worker) {
      StartRead(&command_);
      Next();
    }
    void OnReadDone(bool ok) override {
      if (ok) StartRead(&command_);
    }
    void OnWriteDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::CANCELLED);
        return;
      }
      worker_->writes_done.fetch_add(1);
      Next();
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (sent_ == kEvents) {
        Finish(grpc::Status::OK);
        return;
      }
      event_.Clear();
      v1::StepOutputs& step = *event_.mutable_step();
      step.set_step(++sent_);
      for (int i = 0; i < kOutputsPerEvent; ++i) {
        v1::RequestOutput& output = *step.add_outputs();
        output.set_request_id("r" + std::to_string(i));
        output.add_payloads()->set_raw(std::string(1024, 'x'));
      }
      StartWrite(&event_);
    }
    FloodingWorker* const worker_;
    v1::WorkerCommand command_;
    v1::WorkerEvent event_;
    int sent_ = 0;
  };
};

class GrpcWorkerStubTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<StartedServer> server = StartGrpcServer({}, {&worker_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    WorkerChannelOptions options;
    options.address = "127.0.0.1:" + std::to_string(server_.port);
    options.keepalive_time = absl::Seconds(30);
    stub_ = std::make_unique<GrpcWorkerStub>(options, &loop_);
  }
  void TearDown() override {
    stub_.reset();
    server_.server->Shutdown(absl::ToChronoTime(absl::Now()));
  }

  // Waits until the stub holds its reads: what it read waits for the loop, 16
  // events (16,000 outputs) under the bound and the one read past it. False if
  // that does not happen within 30 s.
  bool ReadsHeld() {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (loop_.pending() < kHeldEvents) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(1));
    }
    return true;
  }
  static constexpr size_t kHeldEvents = 17;

  // With reads held, waits until the worker's writes stop moving: flow control
  // holds them (unchanged for kQuiet, sampled every 10 ms). Returns the count.
  int WritesOnceHeld() {
    constexpr absl::Duration kQuiet = absl::Milliseconds(500);
    int last = worker_.writes_done.load();
    absl::Time since = absl::Now();
    const absl::Time deadline = since + absl::Seconds(30);
    while (absl::Now() - since < kQuiet && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
      const int now = worker_.writes_done.load();
      if (now != last) {
        last = now;
        since = absl::Now();
      }
    }
    return last;
  }

  HeldScheduler loop_;  // First: outlives the stub's callbacks.
  FloodingWorker worker_;
  StartedServer server_;
  std::unique_ptr<GrpcWorkerStub> stub_;
};

TEST_F(GrpcWorkerStubTest, ReadsWaitForTheLoopAndEveryEventArrivesInOrder) {
  std::vector<uint64_t> steps;
  absl::Status done = absl::UnknownError("not done");
  bool ended = false;
  std::shared_ptr<WorkerStream> stream = stub_->Connect(
      [&](v1::WorkerEvent event) { steps.push_back(event.step().step()); },
      [&](absl::Status status) {
        done = status;
        ended = true;
      });
  // What was read waits for the loop: at most 16,384 outputs' worth, plus the
  // one read past it, and no more is read however long the loop waits.
  ASSERT_TRUE(ReadsHeld()) << loop_.pending() << " events read";
  const int stalled = WritesOnceHeld();
  EXPECT_EQ(loop_.pending(), kHeldEvents);
  // The worker is held back well before its last event.
  EXPECT_LT(stalled, kEvents);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (!ended && absl::Now() < deadline) {
    if (loop_.RunPending() == 0) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(ended);
  EXPECT_TRUE(done.ok()) << done;
  ASSERT_EQ(steps.size(), static_cast<size_t>(kEvents));
  for (int i = 0; i < kEvents; ++i) EXPECT_EQ(steps[i], static_cast<uint64_t>(i + 1));
  stream->Close();
}

TEST_F(GrpcWorkerStubTest, ShutdownReturnsWithEventsWaitingForALoopThatStopped) {
  std::shared_ptr<WorkerStream> stream =
      stub_->Connect([](v1::WorkerEvent) {}, [](absl::Status) {});
  ASSERT_TRUE(ReadsHeld());
  loop_.Drop();  // The loop stopped with them queued.
  stub_->Shutdown();  // Would wait forever for a read nobody restarts.
  loop_.Drop();       // The stream's end, posted as it went.
}

// A worker that says Ready (taking batches or not), then reads nothing until
// Release(), and records every message and the seqs of the commands in it.
class RecordingWorker : public v1::StageWorker::CallbackService {
 public:
  explicit RecordingWorker(bool accepts_batches) : accepts_batches_(accepts_batches) {}

  grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* Connect(
      grpc::CallbackServerContext*) override {
    auto* session = new Session(this);
    absl::MutexLock lock(&mu_);
    session_ = session;
    return session;
  }
  // Starts reading (the commands queued meanwhile behind the transport's
  // flow control).
  void Release() {
    absl::MutexLock lock(&mu_);
    session_->Read();
  }
  // (messages read, the seqs of every command in them, in order)
  std::pair<int, std::vector<uint64_t>> Read() {
    absl::MutexLock lock(&mu_);
    return {messages_, seqs_};
  }

 private:
  class Session : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent> {
   public:
    explicit Session(RecordingWorker* worker) : worker_(worker) {
      v1::Ready* ready = ready_.mutable_ready();
      ready->set_accepts_command_batches(worker->accepts_batches_);
      ready->set_max_message_bytes(16 << 20);
      StartWrite(&ready_);
    }
    void Read() { StartRead(&command_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      {
        absl::MutexLock lock(&worker_->mu_);
        ++worker_->messages_;
        if (command_.has_batch()) {
          for (const v1::WorkerCommand& c : command_.batch().commands()) {
            worker_->seqs_.push_back(c.seq());
          }
        } else {
          worker_->seqs_.push_back(command_.seq());
        }
      }
      StartRead(&command_);
    }
    void OnWriteDone(bool) override {}
    void OnDone() override { delete this; }

   private:
    RecordingWorker* const worker_;
    v1::WorkerEvent ready_;
    v1::WorkerCommand command_;
  };

  const bool accepts_batches_;
  absl::Mutex mu_;
  Session* session_ ABSL_GUARDED_BY(mu_) = nullptr;
  int messages_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> seqs_ ABSL_GUARDED_BY(mu_);
};

// Writes 100 adds of 64 KiB to a worker that reads none until they queued
// behind flow control, then lets it read them all; returns how many messages
// carried them (and checks every command came, in order). The worker's
// server lets a stream take at most 64 KiB unread (no window growth by BDP
// probes): the first add, larger, stays in flight until the worker reads, so
// every later one queues behind it however the threads are scheduled.
int MessagesFor100Adds(bool accepts_batches) {
  RecordingWorker worker(accepts_batches);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 << 10);
  builder.SetMaxReceiveMessageSize(16 << 20);
  builder.RegisterService(&worker);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(server, nullptr);
  if (server == nullptr) return -1;
  HeldScheduler loop;
  WorkerChannelOptions options;
  options.address = "127.0.0.1:" + std::to_string(port);
  options.keepalive_time = absl::Seconds(30);
  int messages = -1;
  {
    GrpcWorkerStub stub(options, &loop);
    std::shared_ptr<WorkerStream> stream = stub.Connect([](v1::WorkerEvent) {}, [](absl::Status) {});
    // The Ready was read (so the stream knows whether the worker batches).
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (loop.pending() == 0 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    EXPECT_EQ(loop.pending(), 1u) << "no Ready";
    for (uint64_t seq = 1; seq <= 100; ++seq) {
      v1::WorkerCommand command;
      command.set_seq(seq);
      command.mutable_add()->set_request_id("r" + std::to_string(seq));
      command.mutable_add()->add_input()->set_raw(std::string(64 << 10, 'x'));
      EXPECT_TRUE(stream->Write(std::move(command)).ok());
    }
    worker.Release();
    std::vector<uint64_t> seqs;
    while (absl::Now() < deadline + absl::Seconds(20)) {
      std::tie(messages, seqs) = worker.Read();
      if (seqs.size() == 100) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(seqs.size(), 100u);
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
    stream->Close();
    loop.Drop();
    stub.Shutdown();
    loop.Drop();
  }
  server->Shutdown(absl::ToChronoTime(absl::Now()));
  return messages;
}

// Commands that queue behind the write in flight go out as batches of about
// 256 KiB once the worker's Ready says it takes them; one by one otherwise.
TEST(GrpcWorkerStubBatchTest, QueuedCommandsTravelAsBatchesOnlyToAWorkerThatTakesThem) {
  const int batched = MessagesFor100Adds(/*accepts_batches=*/true);
  EXPECT_GE(batched, 100 * (64 << 10) / (256 << 10));
  EXPECT_LE(batched, 100 / 2) << "commands did not travel together";
  EXPECT_EQ(MessagesFor100Adds(/*accepts_batches=*/false), 100);
}

}  // namespace
}  // namespace omnistage
