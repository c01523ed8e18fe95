// How a worker takes part in failover (docs/engines.md#failover): Ready.resume
// says how its engine resumes a request another replica lost; an AddRequest's
// `produced` reaches a continuation engine, which continues exactly where the
// lost replica left off, and is refused by an engine that cannot resume. (A
// replay engine's refusal, and its Ready, are in the sim_llm worker tests.)
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

class WorkerResumeTest : public WorkerServiceTest {
 protected:
  // The Python test engine `cls` (test_engines.py).
  void StartTestEngine(const std::string& cls) {
    StartWorkerWith("python", {{"path", kPath}, {"module", "test_engines"}, {"class", cls}});
  }

  // A session's Ready.
  v1::Ready Handshake() {
    WorkerTestClient client(channel_);
    absl::StatusOr<v1::Ready> ready = client.Connect();
    EXPECT_TRUE(ready.ok()) << ready.status();
    return ready.value_or(v1::Ready());
  }

  // Sends an Add of `id` (text "once upon a time", seed 42) with `produced`
  // token ids, if any, as the one payload the orchestrator sends; its seq.
  static uint64_t AddResumed(WorkerTestClient& client, const std::string& id,
                             uint32_t max_tokens, const std::vector<int32_t>& produced) {
    v1::WorkerCommand command;
    v1::AddRequest* add = command.mutable_add();
    add->set_request_id(id);
    add->set_input_complete(true);
    add->add_input()->mutable_text()->set_text("once upon a time");
    add->mutable_params()->set_max_tokens(max_tokens);
    add->mutable_params()->set_seed(42);
    if (!produced.empty()) {
      add->add_produced()->mutable_tokens()->mutable_ids()->Add(produced.begin(), produced.end());
    }
    return client.Send(command);
  }

  // The token ids `id` produced, in order, until it finished.
  static std::vector<int32_t> Tokens(WorkerTestClient& client, const std::string& id) {
    std::vector<int32_t> tokens;
    for (const v1::RequestOutput& output : client.CollectUntilFinished(id, absl::Seconds(10))) {
      for (const v1::Payload& payload : output.payloads()) {
        tokens.insert(tokens.end(), payload.tokens().ids().begin(), payload.tokens().ids().end());
      }
      if (output.finished()) {
        EXPECT_EQ(output.finish_reason(), v1::FINISH_REASON_LENGTH);
      }
    }
    return tokens;
  }
};

TEST_F(WorkerResumeTest, ReadySaysHowTheEngineResumes) {
  StartTestEngine("Continuing");
  EXPECT_EQ(Handshake().resume(), v1::RESUME_MODE_CONTINUATION);
}

// What a client receives from the lost replica and then from this one is,
// together, what a fault-free run gives: nothing repeated, nothing missing.
TEST_F(WorkerResumeTest, AContinuationContinuesWhereTheLostReplicaLeftOff) {
  StartTestEngine("Continuing");
  auto client = NewClient();
  AddResumed(*client, "fault-free", 12, {});
  const std::vector<int32_t> whole = Tokens(*client, "fault-free");
  ASSERT_EQ(whole.size(), 12u);
  for (size_t lost_after : {1, 5, 11}) {
    SCOPED_TRACE(lost_after);
    const std::string id = "resumed-" + std::to_string(lost_after);
    std::vector<int32_t> delivered(whole.begin(), whole.begin() + lost_after);
    AddResumed(*client, id, 12, delivered);
    const std::vector<int32_t> rest = Tokens(*client, id);
    delivered.insert(delivered.end(), rest.begin(), rest.end());
    EXPECT_EQ(delivered, whole);
  }
}

TEST_F(WorkerResumeTest, AnEngineThatCannotResumeRefusesProduced) {
  StartTestEngine("Echo");  // declares no `resume`
  EXPECT_EQ(Handshake().resume(), v1::RESUME_MODE_UNSPECIFIED);
  auto client = NewClient();
  ExpectRejected(*client, AddResumed(*client, "resumed", 4, {7}),
                 absl::StatusCode::kInvalidArgument, "cannot resume", "produced");
}

}  // namespace
}  // namespace omnistage
