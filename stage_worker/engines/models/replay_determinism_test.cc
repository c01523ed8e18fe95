// The replay contract (Engine::resume_mode(), docs/engines.md#failover) for
// every built-in engine and output mode, and for the Python sim_llm: with its
// input and parameters (seed included) fixed, a request's output, per payload
// kind, is the same
//   (a) whatever other requests share its batch (and whether it had to wait
//       for a slot),
//   (b) however its input was chunked (one payload, or many cut mid-word),
//   (c) whenever streamed input arrived: all in the Add, or chunk by chunk
//       with steps in between, `last` with the last chunk or alone later,
//   (d) on a fresh instance of the engine.
// Failover replays a lost request on another replica from the input the stage
// had received, and the client must not tell: a difference here is content
// repeated or missing.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/testing/engine_harness.h"
#include "stage_worker/engines/testing/replay_harness.h"

namespace omnistage {
namespace engine_testing {
namespace {

// Three sentences with a comma, a question, digits, and characters of two
// bytes, so that chunks fall inside words and sentences move between chunks.
constexpr char kStory[] =
    "The café by the river opens at 7, quietly. Does the naïve engine sing? "
    "It waits, then answers the letter slowly.";

// The talker's phoneme codes for kStory: the speaking vocoder's real input.
const std::vector<int32_t>& StoryCodes() {
  static const std::vector<int32_t>* const kCodes = [] {
    std::unique_ptr<Engine> talker = MustCreate("talker");
    EXPECT_NE(talker, nullptr);
    auto* codes = new std::vector<int32_t>(
        RunDelivered(talker.get(), {kStory, {}}, v1::StageParameters(), Delivery()).tokens);
    return codes;
  }();
  return *kCodes;
}

std::vector<int32_t> SomeTokens(int count) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) tokens.push_back((i * 37 + 11) % 500);
  return tokens;
}

struct ReplayCase {
  std::string name;  // the test's
  std::string engine;
  std::map<std::string, std::string> engine_params;
  std::function<ReplayInput()> input;
  std::optional<uint32_t> max_tokens;
  std::map<std::string, std::string> extra;
};

ReplayInput Story() { return {kStory, {}}; }
ReplayInput Tokens() { return {"", SomeTokens(40)}; }
ReplayInput Codes() { return {"", StoryCodes()}; }

const std::map<std::string, std::string> kPythonSimLlm = {
    {"path", "stage_worker/engines/python"},
    {"module", "omnistage_engines.sim_llm"},
    {"class", "SimLlm"}};

std::map<std::string, std::string> With(std::map<std::string, std::string> params,
                                        const std::map<std::string, std::string>& more) {
  params.insert(more.begin(), more.end());
  return params;
}

const std::map<std::string, std::string> kSmallCache = {{"prefix_cache_blocks", "6"},
                                                        {"block_tokens", "2"}};

std::vector<ReplayCase> Cases() {
  return {
      {"SimLlmTokens", "sim_llm", {}, Story, 24, {}},
      {"SimLlmTokensFromTokens", "sim_llm", {}, Tokens, 24, {}},
      {"SimLlmText", "sim_llm", {{"output", "text"}}, Story, 24, {}},
      // Production stamps are raw payloads: they differ, the content does not.
      {"SimLlmStamped", "sim_llm", {{"stamp_outputs", "true"}}, Story, 12, {}},
      {"Thinker", "thinker", {}, Story, 1000, {{"sentences", "3"}}},
      {"ThinkerCutShort", "thinker", {}, Story, 7, {}},
      {"TalkerHashed", "talker", {{"codes", "hashed"}}, Story, 10000, {}},
      {"TalkerHashedCutShort", "talker", {{"codes", "hashed"}, {"chars_per_step", "3"}}, Story,
       50, {}},
      {"TalkerPhonemes", "talker", {{"codes_per_step", "8"}}, Story, 10000, {}},
      {"TalkerPhonemesCutShort", "talker", {}, Story, 40, {}},
      {"VocoderTones", "vocoder", {{"sound", "tones"}, {"codes_per_step", "3"}}, Tokens, 1000,
       {}},
      {"VocoderTonesCutShort", "vocoder", {{"sound", "tones"}}, Tokens, 25, {}},
      {"VocoderSpeech", "vocoder", {}, Codes, 100000, {}},
      {"VocoderSpeechVoiceCutShort", "vocoder", {}, Codes, 60, {{"voice", "f2"}}},
      // A prefix cache changes a step's time, never its output: a small one,
      // so that blocks are evicted and found again while the request runs.
      {"SimLlmCached", "sim_llm", With(kSmallCache, {{"prefill_us_per_token", "1"}}), Story, 24,
       {}},
      {"TalkerHashedCached", "talker", With(kSmallCache, {{"codes", "hashed"}}), Story, 10000, {}},
      {"VocoderTonesCached", "vocoder", With(kSmallCache, {{"sound", "tones"}}), Tokens, 1000, {}},
      {"PythonSimLlmTokens", "python", kPythonSimLlm, Story, 24, {}},
      {"PythonSimLlmText", "python", With(kPythonSimLlm, {{"output", "text"}}), Story, 24, {}},
  };
}

class ReplayDeterminismTest : public ::testing::TestWithParam<ReplayCase> {
 protected:
  void SetUp() override {
    input_ = GetParam().input();
    params_.set_seed(20261201);
    if (GetParam().max_tokens.has_value()) params_.set_max_tokens(*GetParam().max_tokens);
    params_.mutable_extra()->insert(GetParam().extra.begin(), GetParam().extra.end());
    want_ = Run(GetParam().engine_params, Delivery());
    // A reference that says nothing would make every comparison pass.
    ASSERT_TRUE(want_.finished);
    ASSERT_NE(want_.finish_reason, v1::FINISH_REASON_ERROR);
    ASSERT_FALSE(want_.text.empty() && want_.tokens.empty() && want_.pcm.empty());
  }

  // What the request produces on a new engine, its input delivered so.
  Collected Run(const std::map<std::string, std::string>& engine_params,
                const Delivery& delivery) {
    std::unique_ptr<Engine> engine = MustCreate(GetParam().engine, engine_params);
    if (engine == nullptr) return {};
    EXPECT_EQ(engine->resume_mode(), ResumeMode::kReplay);
    return RunDelivered(engine.get(), input_, params_, delivery);
  }

  // Inputs of the same kind as the request's, each different.
  std::vector<ReplayInput> Mates() const {
    std::vector<ReplayInput> mates;
    for (int i = 0; i < 3; ++i) {
      ReplayInput mate;
      if (!input_.text.empty()) {
        mate.text = absl::StrCat("Another voice speaks, ", i, " times. ", input_.text);
      }
      for (size_t k = 0; k < input_.tokens.size(); ++k) {
        mate.tokens.push_back(input_.tokens[(k + 5 * i + 1) % input_.tokens.size()]);
      }
      mates.push_back(mate);
    }
    return mates;
  }

  ReplayInput input_;
  v1::StageParameters params_;
  Collected want_;  // alone, on a fresh engine, the input whole in the Add
};

TEST_P(ReplayDeterminismTest, BatchMatesDoNotChangeTheOutput) {
  for (const char* batch_size : {"2", "16"}) {
    SCOPED_TRACE(batch_size);
    std::unique_ptr<Engine> engine =
        MustCreate(GetParam().engine, With(GetParam().engine_params, {{"batch_size", batch_size}}));
    ASSERT_NE(engine, nullptr);
    ExpectSameContent(want_, RunAmongMates(engine.get(), input_, params_, Mates()));
    // And once more on the same engine, after all that.
    ExpectSameContent(want_, RunDelivered(engine.get(), input_, params_, Delivery()));
  }
}

TEST_P(ReplayDeterminismTest, InputChunkingDoesNotChangeTheOutput) {
  for (size_t chunk : {1, 2, 5, 13}) {
    SCOPED_TRACE(chunk);
    Delivery delivery;
    delivery.chunk = chunk;
    ExpectSameContent(want_, Run(GetParam().engine_params, delivery));
  }
}

TEST_P(ReplayDeterminismTest, WhenStreamedInputArrivesDoesNotChangeTheOutput) {
  struct Streamed {
    size_t chunk;
    std::vector<int> steps_between;
    bool last_alone;
  };
  for (const Streamed& s : std::vector<Streamed>{{1, {0}, false},
                                                 {1, {1}, false},
                                                 {4, {3, 0, 2}, false},
                                                 {7, {2}, true},
                                                 {0, {5}, true}}) {
    SCOPED_TRACE(testing::Message() << "chunk " << s.chunk << ", last alone " << s.last_alone);
    Delivery delivery;
    delivery.chunk = s.chunk;
    delivery.streamed = true;
    delivery.steps_between = s.steps_between;
    delivery.last_alone = s.last_alone;
    ExpectSameContent(want_, Run(GetParam().engine_params, delivery));
  }
}

TEST_P(ReplayDeterminismTest, AFreshEngineGivesTheSameOutput) {
  ExpectSameContent(want_, Run(GetParam().engine_params, Delivery()));
}

INSTANTIATE_TEST_SUITE_P(Engines, ReplayDeterminismTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<ReplayCase>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace engine_testing
}  // namespace omnistage
