// The generated gRPC code of both services works end to end: an in-process server
// (callback API, as the real services use) and a generated stub stream messages.
#include <memory>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/orchestrator.grpc.pb.h"
#include "protos/stage_worker.grpc.pb.h"

namespace omnistage {
namespace {

// Answers Hello with Ready and echoes each AddRequest back as one StepOutputs.
class EchoWorker final : public v1::StageWorker::CallbackService {
  class Session : public grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent> {
   public:
    Session() { StartRead(&command_); }
    void OnReadDone(bool ok) override {
      if (!ok) {
        Finish(grpc::Status::OK);
        return;
      }
      event_.Clear();
      if (command_.has_hello()) {
        event_.mutable_ready()->set_session_id("s-" + command_.hello().client_name());
      } else {
        auto* out = event_.mutable_step()->add_outputs();
        out->set_request_id(command_.add().request_id());
        *out->mutable_payloads() = command_.add().input();
        event_.mutable_step()->set_step(command_.seq());
      }
      StartWrite(&event_);
    }
    void OnWriteDone(bool ok) override {
      if (ok) StartRead(&command_);
    }
    void OnDone() override { delete this; }

   private:
    v1::WorkerCommand command_;
    v1::WorkerEvent event_;
  };

  grpc::ServerBidiReactor<v1::WorkerCommand, v1::WorkerEvent>* Connect(
      grpc::CallbackServerContext*) override {
    return new Session();
  }
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx,
                                  const v1::WorkerAbortRequest* request,
                                  v1::WorkerAbortResponse* response) override {
    *response->mutable_aborted_ids() = request->request_ids();
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// Streams the prompt back one character per response, then a terminal.
class SpellingOrchestrator final : public v1::Orchestrator::CallbackService {
  class Stream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
   public:
    explicit Stream(std::string prompt) : prompt_(std::move(prompt)) { Next(); }
    void OnWriteDone(bool ok) override {
      if (ok) Next();
      else Finish(grpc::Status::CANCELLED);
    }
    void OnDone() override { delete this; }

   private:
    void Next() {
      if (pos_ > prompt_.size()) {
        Finish(grpc::Status::OK);
        return;
      }
      response_.Clear();
      response_.set_request_id("r");
      if (pos_ < prompt_.size()) {
        auto* chunk = response_.add_outputs();
        chunk->set_modality(v1::MODALITY_TEXT);
        chunk->mutable_payload()->mutable_text()->set_text(prompt_.substr(pos_, 1));
      } else {
        response_.mutable_terminal()->set_finish_reason(v1::FINISH_REASON_STOP);
      }
      ++pos_;
      StartWrite(&response_);
    }
    std::string prompt_;
    size_t pos_ = 0;
    v1::GenerateResponse response_;
  };

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(
      grpc::CallbackServerContext*, const v1::GenerateRequest* request) override {
    return new Stream(request->prompt());
  }
};

class ServiceStubsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&worker_);
    builder.RegisterService(&orchestrator_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = server_->InProcessChannel(grpc::ChannelArguments());
  }
  void TearDown() override { server_->Shutdown(); }

  EchoWorker worker_;
  SpellingOrchestrator orchestrator_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ServiceStubsTest, WorkerConnectIsBidirectional) {
  auto stub = v1::StageWorker::NewStub(channel_);
  grpc::ClientContext ctx;
  auto stream = stub->Connect(&ctx);
  v1::WorkerCommand hello;
  hello.set_seq(1);
  hello.mutable_hello()->set_client_name("orch");
  ASSERT_TRUE(stream->Write(hello));
  v1::WorkerEvent event;
  ASSERT_TRUE(stream->Read(&event));
  EXPECT_EQ(event.ready().session_id(), "s-orch");

  for (int i = 2; i < 5; ++i) {
    v1::WorkerCommand add;
    add.set_seq(i);
    add.mutable_add()->set_request_id("r" + std::to_string(i));
    add.mutable_add()->add_input()->mutable_text()->set_text("hi");
    ASSERT_TRUE(stream->Write(add));
    ASSERT_TRUE(stream->Read(&event));
    ASSERT_EQ(event.event_case(), v1::WorkerEvent::kStep);
    EXPECT_EQ(event.step().step(), static_cast<uint64_t>(i));
    EXPECT_EQ(event.step().outputs(0).request_id(), "r" + std::to_string(i));
    EXPECT_EQ(event.step().outputs(0).payloads(0).text().text(), "hi");
  }
  ASSERT_TRUE(stream->WritesDone());
  EXPECT_FALSE(stream->Read(&event));
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(ServiceStubsTest, WorkerAbortCarriesManyIds) {
  auto stub = v1::StageWorker::NewStub(channel_);
  grpc::ClientContext ctx;
  v1::WorkerAbortRequest request;
  request.set_session_id("s");
  request.set_after_seq(9);
  for (const char* id : {"a", "b", "c"}) request.add_request_ids(id);
  v1::WorkerAbortResponse response;
  ASSERT_TRUE(stub->Abort(&ctx, request, &response).ok());
  ASSERT_EQ(response.aborted_ids_size(), 3);
  EXPECT_EQ(response.aborted_ids(2), "c");
}

TEST_F(ServiceStubsTest, OrchestratorGenerateStreamsToTerminal) {
  auto stub = v1::Orchestrator::NewStub(channel_);
  grpc::ClientContext ctx;
  v1::GenerateRequest request;
  request.set_prompt("omni");
  auto reader = stub->Generate(&ctx, request);
  std::string text;
  int terminals = 0;
  v1::GenerateResponse response;
  while (reader->Read(&response)) {
    for (const auto& chunk : response.outputs()) text += chunk.payload().text().text();
    if (response.has_terminal()) {
      ++terminals;
      EXPECT_EQ(response.terminal().finish_reason(), v1::FINISH_REASON_STOP);
    }
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(text, "omni");
  EXPECT_EQ(terminals, 1);
}

}  // namespace
}  // namespace omnistage
