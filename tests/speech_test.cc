// The demo pipeline says what it prints: pipelines/local_omni.yaml as
// the orchestrator reads it, run as processes (PipelineHarness: each replica a
// stage_worker with the config's engine and parameters), with one change: the
// talker's codes also stream back to the client (final_output), so the test
// sees the codes the vocoder received. Those must be espeak-ng's own phonemes
// for the printed text, and the audio as long as espeak-ng speaking that text.
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/modality.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "orchestrator/config/pipeline_config.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/phoneme_codes.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr char kDemoConfig[] = "pipelines/local_omni.yaml";
constexpr char kDemoPrompt[] = "Tell me something about the sea.";  // demo.sh's
constexpr double kAudioRateHz = 24000;                              // the vocoder's default

// The demo config's stages, with the talker's output streamed back too.
absl::StatusOr<PipelineSpec> DemoSpec() {
  absl::StatusOr<PipelineSpec> spec = SpecFromConfig(kDemoConfig);
  if (!spec.ok()) return spec;
  for (StageSpec& stage : spec->stages) stage.final_output |= stage.engine == "talker";
  return spec;
}

// `codes` split at clause ends, each clause as espeak-ng writes its phonemes.
std::vector<std::string> ClausePhonemes(const std::vector<int32_t>& codes) {
  std::vector<std::string> clauses;
  std::vector<int32_t> clause;
  for (int32_t code : codes) {
    if (!IsClauseEnd(code)) {
      clause.push_back(code);
      continue;
    }
    clauses.push_back(PhonemeText(clause));
    clause.clear();
  }
  EXPECT_TRUE(clause.empty()) << "codes after the last clause end";
  return clauses;
}

TEST(SpeechProcessTest, DemoPipelineSaysThePrintedText) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  ASSERT_TRUE(espeak.ok()) << espeak.status();
  absl::StatusOr<PipelineSpec> spec = DemoSpec();
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->stages.size(), 3u);
  ASSERT_EQ(spec->stages[1].engine, "talker");
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(*spec);
  ASSERT_NE(pipeline, nullptr);

  v1::GenerateRequest request = MakeRequest("speech-1", kDemoPrompt);
  for (v1::Modality m : {v1::MODALITY_TEXT, v1::MODALITY_TOKENS, v1::MODALITY_AUDIO}) {
    request.add_output_modalities(m);
  }
  const GenerateResult first = pipeline->Generate(request);
  ExpectOneTerminal(first);
  EXPECT_EQ(first.terminal.finish_reason(), v1::FINISH_REASON_STOP) << first.Summary();
  ASSERT_FALSE(first.text.empty());
  // The audio streams: it starts before the stream ends.
  EXPECT_LT(first.first_audio_response, first.terminal_response) << first.Summary();

  // The vocoder received espeak-ng's own phonemes for the printed text.
  const std::vector<std::string> expected = (*espeak)->Phonemes(first.text);
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(ClausePhonemes(first.tokens), expected) << "text: " << first.text;

  // And spoke them: as long as espeak-ng speaking the text itself, within 25%.
  absl::StatusOr<std::vector<int16_t>> direct = (*espeak)->Speak(first.text);
  ASSERT_TRUE(direct.ok()) << direct.status();
  const double direct_s = static_cast<double>(direct->size()) / (*espeak)->sample_rate_hz();
  const double audio_s = static_cast<double>(first.audio.size()) / 2 / kAudioRateHz;
  RecordProperty("audio_ms", static_cast<int>(audio_s * 1000));
  RecordProperty("espeak_direct_ms", static_cast<int>(direct_s * 1000));
  EXPECT_NEAR(audio_s / direct_s, 1.0, 0.25)
      << audio_s << " s of audio, espeak-ng speaks the text in " << direct_s << " s";

  // Deterministic, whichever talker replica takes the request.
  request.set_request_id("speech-2");
  const GenerateResult second = pipeline->Generate(request);
  ExpectOneTerminal(second);
  EXPECT_EQ(second.text, first.text);
  EXPECT_EQ(second.tokens, first.tokens);
  EXPECT_TRUE(second.audio == first.audio) << "audio differs between identical requests";
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(5));
}

}  // namespace
}  // namespace omnistage
