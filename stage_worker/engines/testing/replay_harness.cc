#include "stage_worker/engines/testing/replay_harness.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/base/batching_engine.h"

namespace omnistage {
namespace engine_testing {
namespace {

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xc0) == 0x80; }

// What the busy loop does with a request: both checks, then Add.
void Submit(Engine* engine, EngineRequest request) {
  ASSERT_TRUE(engine->Validate(request).ok()) << engine->Validate(request);
  ASSERT_TRUE(engine->ValidateInLoop(request).ok());
  ASSERT_TRUE(engine->Add(std::move(request)).ok());
}

// Up to `steps` steps, each only while the engine has work (the busy loop
// never steps an engine without).
void StepFor(Engine* engine, int steps, std::map<std::string, Collected>* by_id) {
  for (int i = 0; i < steps && engine->HasWork(); ++i) {
    absl::StatusOr<std::vector<v1::RequestOutput>> outputs = engine->Step();
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    Collect(*outputs, by_id);
  }
}

void StepUntilIdle(Engine* engine, std::map<std::string, Collected>* by_id) {
  StepFor(engine, 100000, by_id);
  EXPECT_FALSE(engine->HasWork()) << "still working after 100000 steps";
}

EngineRequest Request(std::string id, std::vector<v1::Payload> input, bool complete,
                      v1::StageParameters params) {
  EngineRequest request;
  request.id = std::move(id);
  request.input = std::move(input);
  request.input_complete = complete;
  request.params = std::move(params);
  return request;
}

}  // namespace

std::vector<v1::Payload> Chunks(const ReplayInput& input, size_t chunk) {
  std::vector<v1::Payload> chunks;
  if (!input.text.empty()) {
    const size_t size = input.text.size();
    const size_t step = chunk == 0 ? size : chunk;
    for (size_t begin = 0; begin < size;) {
      size_t end = std::min(size, begin + step);
      while (end < size && IsContinuationByte(input.text[end])) ++end;
      chunks.push_back(TextPayload(input.text.substr(begin, end - begin)));
      begin = end;
    }
  }
  if (!input.tokens.empty()) {
    const size_t size = input.tokens.size();
    const size_t step = chunk == 0 ? size : chunk;
    for (size_t begin = 0; begin < size; begin += step) {
      chunks.push_back(TokensPayload(
          {input.tokens.begin() + begin, input.tokens.begin() + std::min(size, begin + step)}));
    }
  }
  return chunks;
}

Collected RunDelivered(Engine* engine, const ReplayInput& input,
                       const v1::StageParameters& params, const Delivery& delivery) {
  std::map<std::string, Collected> by_id;
  std::vector<v1::Payload> chunks = Chunks(input, delivery.chunk);
  if (!delivery.streamed) {
    Submit(engine, Request(kReplayId, std::move(chunks), true, params));
    StepUntilIdle(engine, &by_id);
    return by_id[kReplayId];
  }
  std::vector<v1::Payload> first;
  if (!chunks.empty()) first.push_back(chunks.front());
  Submit(engine, Request(kReplayId, std::move(first), false, params));
  const std::vector<int>& pauses = delivery.steps_between;
  size_t turn = 0;
  auto pause = [&] { StepFor(engine, pauses.empty() ? 0 : pauses[turn++ % pauses.size()], &by_id); };
  for (size_t i = 1; i < chunks.size(); ++i) {
    pause();
    const bool last = i + 1 == chunks.size() && !delivery.last_alone;
    EXPECT_TRUE(engine->AppendInput(kReplayId, {chunks[i]}, last).ok());
  }
  if (delivery.last_alone || chunks.size() <= 1) {
    pause();
    EXPECT_TRUE(engine->AppendInput(kReplayId, {}, true).ok());
  }
  StepUntilIdle(engine, &by_id);
  return by_id[kReplayId];
}

Collected RunAmongMates(Engine* engine, const ReplayInput& input,
                        const v1::StageParameters& params, const std::vector<ReplayInput>& mates) {
  std::map<std::string, Collected> by_id;
  auto add_mate = [&](size_t i) {
    if (i >= mates.size()) return;
    v1::StageParameters mate_params = params;
    mate_params.set_seed(params.seed() + 1000 + i);
    Submit(engine, Request(absl::StrCat("mate", i), Chunks(mates[i], 0), true, mate_params));
  };
  add_mate(0);
  Submit(engine, Request(kReplayId, Chunks(input, 0), true, params));
  add_mate(1);
  StepFor(engine, 2, &by_id);
  add_mate(2);
  StepFor(engine, 1, &by_id);
  engine->Abort({"mate0"});
  StepUntilIdle(engine, &by_id);
  return by_id[kReplayId];
}

void ExpectSameContent(const Collected& want, const Collected& got) {
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.tokens, want.tokens);
  // Audio is too long to print: its size, then whether the bytes match.
  EXPECT_EQ(got.pcm.size(), want.pcm.size());
  EXPECT_TRUE(got.pcm == want.pcm) << "the audio differs";
  EXPECT_EQ(got.finished, want.finished);
  EXPECT_EQ(got.finish_reason, want.finish_reason);
}

}  // namespace engine_testing
}  // namespace omnistage
