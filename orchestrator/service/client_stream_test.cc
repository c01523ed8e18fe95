// Tests for ClientStream, the Generate call's response side, over a recording
// transport: merging what queues during a write, the ~1 MiB split, the terminal
// with the last chunks and the call's end, what one loop task sends written
// once, errors before the start, and a client that goes away.
#include "orchestrator/service/client_stream.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;

class RecordingTransport : public ClientStream::Transport {
 public:
  void BeginWrite(const v1::GenerateResponse* response) override {
    writes.push_back(*response);
    ++in_flight;
  }
  void FinishStream(const absl::Status& status) override {
    EXPECT_EQ(in_flight, 0) << "finished with a write in flight";
    finishes.push_back(status);
  }
  void CancelStream() override { ++cancels; }
  void BeginWriteAndFinish(const v1::GenerateResponse* response,
                           const absl::Status& status) override {
    EXPECT_EQ(in_flight, 0) << "a last write with a write in flight";
    writes.push_back(*response);
    finishes.push_back(status);
    ++ended_with_a_write;
  }

  std::vector<v1::GenerateResponse> writes;
  std::vector<absl::Status> finishes;
  int in_flight = 0;
  int cancels = 0;
  int ended_with_a_write = 0;  // Finishes that came with the last write.
};

v1::OutputChunk TextChunk(const std::string& text) {
  v1::OutputChunk chunk;
  chunk.set_stage_id(0);
  chunk.set_modality(v1::MODALITY_TEXT);
  chunk.mutable_payload()->mutable_text()->set_text(text);
  return chunk;
}

std::string Texts(const v1::GenerateResponse& response) {
  std::string out;
  for (const v1::OutputChunk& c : response.outputs()) out += c.payload().text().text() + "|";
  return out;
}

class ClientStreamTest : public ::testing::Test {
 protected:
  ClientStreamTest()
      : stream_(std::make_shared<ClientStream>(
            &transport_, [this](std::shared_ptr<ClientStream>, const std::string& id) {
              cancelled_.push_back(id);
            })) {}

  void Complete(bool ok = true) {
    ASSERT_EQ(transport_.in_flight, 1);
    --transport_.in_flight;
    stream_->OnWriteDone(ok);
  }

  RecordingTransport transport_;
  std::vector<std::string> cancelled_;
  std::shared_ptr<ClientStream> stream_;
};

TEST_F(ClientStreamTest, ChunksQueuedDuringAWriteTravelTogetherWithTheTerminal) {
  stream_->Started("r1");
  stream_->Send("r1", {TextChunk("a")});
  stream_->Send("r1", {TextChunk("b")});
  stream_->Send("r1", {TextChunk("c"), TextChunk("d")});
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_REASON_STOP);
  stream_->Finish("r1", terminal);
  stream_->Send("r1", {TextChunk("after the end")});
  ASSERT_EQ(transport_.writes.size(), 1u);
  EXPECT_EQ(Texts(transport_.writes[0]), "a|");
  Complete();
  ASSERT_EQ(transport_.writes.size(), 2u);
  const v1::GenerateResponse& merged = transport_.writes[1];
  EXPECT_EQ(merged.request_id(), "r1");
  EXPECT_EQ(Texts(merged), "b|c|d|");
  EXPECT_EQ(merged.terminal().finish_reason(), v1::FINISH_REASON_STOP);
  // The call's end goes in the same step as the terminal.
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_TRUE(transport_.finishes[0].ok());
  EXPECT_EQ(transport_.ended_with_a_write, 1);
  EXPECT_EQ(transport_.in_flight, 0);
  EXPECT_FALSE(transport_.writes[0].has_terminal());
}

// What the core sends during one task of its loop is written when the task
// returns: a one-output request's chunk, terminal and end leave as one write.
TEST(ClientStreamDeferTest, WhatOneTaskSendsLeavesAsOneWriteWithTheEnd) {
  RecordingTransport transport;
  std::vector<std::function<void()>> deferred;
  auto stream = std::make_shared<ClientStream>(
      &transport, [](std::shared_ptr<ClientStream>, const std::string&) {}, [](int64_t) {},
      /*max_queued_bytes=*/0, [&deferred](std::function<void()> write) {
        deferred.push_back(std::move(write));
      });
  stream->Started("r1");
  stream->Send("r1", {TextChunk("a")});
  stream->Send("r1", {TextChunk("b")});
  v1::Terminal terminal;
  terminal.set_finish_reason(v1::FINISH_REASON_LENGTH);
  stream->Finish("r1", terminal);
  EXPECT_TRUE(transport.writes.empty()) << "written before the task returned";
  ASSERT_EQ(deferred.size(), 1u) << "one flush per task";
  deferred[0]();  // The task returned.
  ASSERT_EQ(transport.writes.size(), 1u);
  EXPECT_EQ(Texts(transport.writes[0]), "a|b|");
  EXPECT_EQ(transport.writes[0].request_id(), "r1");
  EXPECT_EQ(transport.writes[0].terminal().finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(transport.ended_with_a_write, 1);
  ASSERT_EQ(transport.finishes.size(), 1u);
  EXPECT_TRUE(transport.finishes[0].ok());

  // A terminal that would take the last response past ~1 MiB follows it alone.
  RecordingTransport big_transport;
  deferred.clear();
  auto big = std::make_shared<ClientStream>(
      &big_transport, [](std::shared_ptr<ClientStream>, const std::string&) {}, [](int64_t) {},
      /*max_queued_bytes=*/0,
      [&deferred](std::function<void()> write) { deferred.push_back(std::move(write)); });
  big->Send("r3", {TextChunk(std::string(ClientStream::kMaxResponseBytes - 8, 'x'))});
  v1::Terminal long_terminal;
  long_terminal.mutable_error()->set_message(std::string(64, 'e'));
  big->Finish("r3", long_terminal);
  ASSERT_EQ(deferred.size(), 1u);
  deferred[0]();
  ASSERT_EQ(big_transport.writes.size(), 1u);
  EXPECT_FALSE(big_transport.writes[0].has_terminal());
  --big_transport.in_flight;
  big->OnWriteDone(true);
  ASSERT_EQ(big_transport.writes.size(), 2u);
  EXPECT_EQ(big_transport.writes[1].outputs_size(), 0);
  EXPECT_TRUE(big_transport.writes[1].has_terminal());
  EXPECT_EQ(big_transport.ended_with_a_write, 1);

  // A stream that fails writes what was sent before, then ends with the error.
  RecordingTransport failing_transport;
  deferred.clear();
  auto failing = std::make_shared<ClientStream>(
      &failing_transport, [](std::shared_ptr<ClientStream>, const std::string&) {},
      [](int64_t) {}, /*max_queued_bytes=*/0,
      [&deferred](std::function<void()> write) { deferred.push_back(std::move(write)); });
  failing->Send("r2", {TextChunk("c")});
  failing->Fail(absl::UnavailableError("gone"));
  ASSERT_EQ(failing_transport.writes.size(), 1u);
  EXPECT_EQ(Texts(failing_transport.writes[0]), "c|");
  for (auto& write : deferred) write();  // Nothing more to write.
  EXPECT_EQ(failing_transport.writes.size(), 1u);
  --failing_transport.in_flight;
  failing->OnWriteDone(true);
  ASSERT_EQ(failing_transport.finishes.size(), 1u);
  EXPECT_EQ(failing_transport.finishes[0].code(), absl::StatusCode::kUnavailable);
}

TEST_F(ClientStreamTest, ResponsesStayNearOneMebibyte) {
  stream_->Started("r1");
  const std::string kilobytes(400 << 10, 'x');
  // Seven 400 KiB chunks in one Send: split at ~1 MiB, two chunks a response.
  std::vector<v1::OutputChunk> chunks;
  for (int i = 0; i < 7; ++i) chunks.push_back(TextChunk(kilobytes));
  stream_->Send("r1", std::move(chunks));
  // A chunk larger than the limit still goes, alone.
  stream_->Send("r1", {TextChunk(std::string(3 << 20, 'y'))});
  stream_->Finish("r1", v1::Terminal());
  while (transport_.in_flight == 1) Complete();
  std::vector<int> per_response;
  for (const v1::GenerateResponse& r : transport_.writes) {
    per_response.push_back(r.outputs_size());
    if (r.outputs_size() > 1) {
      EXPECT_LE(r.ByteSizeLong(), ClientStream::kMaxResponseBytes + 64);
    }
  }
  // The terminal would push the large chunk's response further over: it follows.
  EXPECT_THAT(per_response, ElementsAre(2, 2, 2, 1, 1, 0));
  EXPECT_TRUE(transport_.writes.back().has_terminal());
  EXPECT_EQ(transport_.finishes.size(), 1u);
}

TEST_F(ClientStreamTest, FailBeforeTheStartEndsTheCallWithTheError) {
  stream_->Fail(absl::InvalidArgumentError("prompt is empty"));
  EXPECT_TRUE(transport_.writes.empty());
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kInvalidArgument);
  stream_->Finish("r1", v1::Terminal());
  EXPECT_EQ(transport_.finishes.size(), 1u);
}

TEST_F(ClientStreamTest, ClientGoneBeforeTheStartIsCancelledOnceStarted) {
  stream_->OnCancel();
  EXPECT_TRUE(cancelled_.empty());
  stream_->Started("r7");
  EXPECT_THAT(cancelled_, ElementsAre("r7"));
}

TEST_F(ClientStreamTest, ClientGoneMidStreamCancelsTheRequest) {
  stream_->Started("r1");
  stream_->Send("r1", {TextChunk("a")});
  stream_->Send("r1", {TextChunk("b")});
  Complete(/*ok=*/false);  // The client is gone.
  stream_->OnCancel();
  EXPECT_THAT(cancelled_, ElementsAre("r1"));
  ASSERT_EQ(transport_.finishes.size(), 1u);
  EXPECT_EQ(transport_.finishes[0].code(), absl::StatusCode::kCancelled);
  stream_->Finish("r1", v1::Terminal());  // The core's terminal: nowhere to go.
  EXPECT_EQ(transport_.writes.size(), 1u);
  EXPECT_EQ(transport_.finishes.size(), 1u);
}

// A stream with a bound of 1 MiB on what may queue for the client.
std::shared_ptr<ClientStream> BoundedStream(RecordingTransport* transport) {
  return std::make_shared<ClientStream>(
      transport, [](std::shared_ptr<ClientStream>, const std::string&) {}, [](int64_t) {},
      /*max_queued_bytes=*/1 << 20);
}

TEST(ClientStreamBoundTest, OnlyAClientBehindByTheBoundIsCalledTooSlow) {
  // Gone: what the core still sends is dropped, and says nothing of its reading.
  RecordingTransport gone_transport;
  std::shared_ptr<ClientStream> gone = BoundedStream(&gone_transport);
  gone->Started("r1");
  gone->Send("r1", {TextChunk("a")});
  --gone_transport.in_flight;
  gone->OnWriteDone(/*ok=*/false);
  ::testing::internal::CaptureStderr();
  gone->Send("r1", {TextChunk("b")});
  EXPECT_EQ(::testing::internal::GetCapturedStderr().find("too slowly"), std::string::npos);

  // Behind by more than the bound: that is said, and the call cancelled.
  RecordingTransport transport;
  std::shared_ptr<ClientStream> slow = BoundedStream(&transport);
  slow->Started("r2");
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 8; ++i) slow->Send("r2", {TextChunk(std::string(256 << 10, 'x'))});
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("the client reads too slowly"), std::string::npos) << said;
  EXPECT_EQ(transport.cancels, 1);
}

}  // namespace
}  // namespace omnistage
