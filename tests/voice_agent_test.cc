// The voice agent end to end, as processes: pipelines/
// local_voice_agent.yaml (listener -> thinker -> talker -> vocoder) hears
// known sentences that espeak-ng speaks, streamed into GenerateDuplex calls as
// a microphone sends them (20 ms pieces at espeak's own rate: the listener
// resamples), and answers in text and audio. The transcripts' word error rate
// is measured and bounded (docs/engines.md, "listener"). The speaker is the
// voice the listener hears best, and the listener is told its channel's mean,
// as a deployment tells it its microphones' (stage_worker/engines/testing/test_speaker.h).
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/testing/test_speaker.h"
#include "stage_worker/engines/testing/word_error_rate.h"
#include "tests/pipeline_harness.h"
#include "tests/pipeline_test_util.h"

namespace omnistage {
namespace {

constexpr char kVoiceAgentConfig[] = "pipelines/local_voice_agent.yaml";

constexpr absl::Duration kCallTimeout = absl::Seconds(90);
// Measured 0.27 (8 of 30 words; 0.87 with espeak-ng's default voice and the
// model's own mean). Decoding is deterministic and the same in a batch as
// alone, so the bound leaves room for a changed model, not for noise.
constexpr double kMaxWordErrorRate = 0.35;

const char* const kSentences[] = {
    "Tell me something about the sea.",
    "What time does the train leave tomorrow morning.",
    "Please turn on the lights in the kitchen.",
    "How far is it to the nearest station.",
};

// 20 ms of `pcm` per message, as a microphone would send it.
std::vector<v1::GenerateInput> AsMicrophone(const std::vector<int16_t>& pcm, int rate_hz) {
  std::vector<v1::GenerateInput> messages;
  const size_t piece = static_cast<size_t>(rate_hz) / 50;
  for (size_t at = 0; at < pcm.size(); at += piece) {
    const size_t n = std::min(piece, pcm.size() - at);
    v1::GenerateInput& message = messages.emplace_back();
    v1::AudioChunk* audio = message.mutable_input()->add_payloads()->mutable_audio();
    audio->set_pcm_s16le(std::string(reinterpret_cast<const char*>(pcm.data() + at), 2 * n));
    audio->set_sample_rate_hz(rate_hz);
    audio->set_channels(1);
  }
  return messages;
}

TEST(VoiceAgentProcessTest, HearsSpokenSentencesAndAnswersInTextAndAudio) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  ASSERT_TRUE(espeak.ok()) << espeak.status();
  absl::StatusOr<PipelineSpec> spec = SpecFromConfig(kVoiceAgentConfig);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_EQ(spec->stages[0].engine, "listener");
  spec->stages[0].engine_params += absl::StrCat(",cmn_init=", kTestSpeakerChannelMean);
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(*spec);
  ASSERT_NE(pipeline, nullptr);

  // All sentences at once, each its own call.
  std::vector<std::unique_ptr<GenerateCall>> calls;
  for (size_t i = 0; i < std::size(kSentences); ++i) {
    absl::StatusOr<std::vector<int16_t>> pcm =
        (*espeak)->Speak(kSentences[i], kTestSpeakerVariant, kTestSpeakerVoice);
    ASSERT_TRUE(pcm.ok()) << pcm.status();
    calls.push_back(std::make_unique<GenerateCall>(pipeline->stub(),
                                                   MakeRequest(absl::StrCat("said-", i), ""),
                                                   kCallTimeout, "", GenerateCall::DuplexTag()));
    for (const v1::GenerateInput& message : AsMicrophone(*pcm, (*espeak)->sample_rate_hz())) {
      ASSERT_TRUE(calls.back()->Send(message));
    }
    ASSERT_TRUE(calls.back()->CloseInput());
  }
  WordErrors errors;
  for (size_t i = 0; i < calls.size(); ++i) {
    const GenerateResult r = calls[i]->Wait(kCallTimeout);
    ExpectOneTerminal(r);
    ASSERT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r.Summary();
    // Stage 0's text is what was heard; the thinker's follows it.
    const std::string heard = r.StageText(0);
    const std::string answer = r.StageText(1);
    const WordErrors these = CountWordErrors(kSentences[i], heard);
    std::cout << "said:   " << kSentences[i] << "\nheard:  " << heard << " (" << these.edits
              << " of " << these.reference_words << " words wrong)\nanswer: " << answer << "\n";
    errors += these;
    EXPECT_FALSE(answer.empty()) << r.Summary();
    EXPECT_GT(r.audio.size(), 24000u) << "less than half a second of spoken answer";
  }
  std::cout << "word error rate: " << errors.rate() << " (" << errors.edits << " of "
            << errors.reference_words << ")\n";
  EXPECT_LE(errors.rate(), kMaxWordErrorRate);
  ExpectPipelineBecomesIdle(*pipeline, absl::Seconds(10));
}

TEST(VoiceAgentProcessTest, TypedTextGoesStraightToTheThinker) {
  absl::StatusOr<PipelineSpec> spec = SpecFromConfig(kVoiceAgentConfig);
  ASSERT_TRUE(spec.ok()) << spec.status();
  std::unique_ptr<PipelineHarness> pipeline = StartPipeline(*spec);
  ASSERT_NE(pipeline, nullptr);
  GenerateCall call(pipeline->stub(), MakeRequest("typed", "Tell me about the sea."), kCallTimeout,
                    "", GenerateCall::DuplexTag());
  ASSERT_TRUE(call.CloseInput());
  const GenerateResult r = call.Wait(kCallTimeout);
  ExpectOneTerminal(r);
  EXPECT_EQ(r.terminal.finish_reason(), v1::FINISH_REASON_STOP) << r.Summary();
  EXPECT_EQ(r.StageText(0), "Tell me about the sea.");
  EXPECT_FALSE(r.StageText(1).empty());
}

}  // namespace
}  // namespace omnistage
