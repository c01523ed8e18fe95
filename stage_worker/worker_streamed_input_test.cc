// A worker's part in the streamed-input contract (docs/engines.md): Ready
// says whether its engine takes input in pieces, and an engine that takes none
// never sees an Add whose input is not complete: the worker refuses it with
// FAILED_PRECONDITION, and the session goes on.
#include <map>
#include <string>

#include "gtest/gtest.h"
#include "stage_worker/testing/worker_service_harness.h"

namespace omnistage {
namespace {

constexpr char kPath[] = "stage_worker/engines/python:stage_worker/engines/python/testdata";

struct Declared {
  std::string engine;
  std::map<std::string, std::string> params;
  v1::StreamedInput expected;
};

class ReadyStreamedInputTest : public WorkerServiceTest,
                               public ::testing::WithParamInterface<Declared> {};

TEST_P(ReadyStreamedInputTest, ReadyCarriesTheEnginesValue) {
  StartWorkerWith(GetParam().engine, GetParam().params);
  WorkerTestClient client(channel_);
  absl::StatusOr<v1::Ready> ready = client.Connect();
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->streamed_input(), GetParam().expected);
}

std::map<std::string, std::string> TestEngine(const std::string& cls) {
  return {{"path", kPath}, {"module", "test_engines"}, {"class", cls}};
}

INSTANTIATE_TEST_SUITE_P(
    Engines, ReadyStreamedInputTest,
    ::testing::Values(
        Declared{"talker", {}, v1::STREAMED_INPUT_INCREMENTAL},
        Declared{"sim_llm", {}, v1::STREAMED_INPUT_WHOLE},
        // One decoder: the listener loads a pocketsphinx model per batch slot.
        Declared{"listener", {{"batch_size", "1"}}, v1::STREAMED_INPUT_INCREMENTAL},
        Declared{"python", TestEngine("Echo"), v1::STREAMED_INPUT_WHOLE},
        Declared{"python", TestEngine("Incremental"), v1::STREAMED_INPUT_INCREMENTAL},
        Declared{"python", TestEngine("Unstreamed"), v1::STREAMED_INPUT_NONE}),
    [](const ::testing::TestParamInfo<Declared>& info) {
      return info.param.engine == "python" ? info.param.params.at("class") : info.param.engine;
    });

class WorkerStreamedInputTest : public WorkerServiceTest {};

TEST_F(WorkerStreamedInputTest, AnEngineThatTakesNoPiecesRefusesAnIncompleteAdd) {
  StartWorkerWith("python", TestEngine("Unstreamed"));
  auto client = NewClient();
  const uint64_t seq = client->Add("pieces", "the start", 8, /*input_complete=*/false);
  ExpectRejected(*client, seq, absl::StatusCode::kFailedPrecondition,
                 "takes no streamed input (Ready.streamed_input is NONE)");
  // Only that request: the same session's whole input is served.
  client->Add("whole", "all of it", 8);
  std::string text;
  for (const v1::RequestOutput& output :
       client->CollectUntilFinished("whole", absl::Seconds(10))) {
    for (const v1::Payload& payload : output.payloads()) text += payload.text().text();
  }
  EXPECT_EQ(text, "all of it");
}

// The same Add to an engine that takes pieces is accepted: the refusal is the
// declared value's, not the Add's.
TEST_F(WorkerStreamedInputTest, AnEngineThatTakesPiecesAcceptsTheSameAdd) {
  StartWorkerWith("python", TestEngine("Incremental"));
  auto client = NewClient();
  client->Add("pieces", "the start", 8, /*input_complete=*/false);
  std::string text;
  for (const v1::RequestOutput& output :
       client->CollectUntilFinished("pieces", absl::Seconds(10))) {
    for (const v1::Payload& payload : output.payloads()) text += payload.text().text();
  }
  EXPECT_EQ(text, "the start");  // Echo answers at its next step
}

}  // namespace
}  // namespace omnistage
