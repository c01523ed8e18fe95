// The vocoder with `sound: speech` (its default): phoneme codes -> espeak-ng's
// speech at 24 kHz.
#include "stage_worker/engines/models/vocoder_speech.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/field_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "stage_worker/engines/models/vocoder.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/phoneme_codes.h"
#include "stage_worker/engines/testing/engine_harness.h"

namespace omnistage {
namespace {

using engine_testing::Collected;
using engine_testing::MakeRequest;
using engine_testing::PcmSamples;
using engine_testing::RunToCompletion;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kText[] = "Hello, world. Is this a question? The quiet river sings softly.";

Espeak& MustGetEspeak() {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  EXPECT_TRUE(espeak.ok()) << espeak.status();
  if (!espeak.ok()) std::abort();
  return **espeak;
}

// The talker's codes for kText, built here from espeak-ng's phonemes.
std::vector<int32_t> TextCodes() {
  const std::vector<std::string> clauses = MustGetEspeak().Phonemes(kText, kPhonemeSeparator);
  EXPECT_EQ(clauses.size(), 4u);
  const char ends[] = {',', '.', '?', '.'};
  std::vector<int32_t> codes;
  for (size_t i = 0; i < clauses.size() && i < 4; ++i) {
    AppendPhonemeCodes(clauses[i], &codes);
    codes.push_back(ClauseEndCode(ends[i]));
  }
  return codes;
}

std::unique_ptr<Engine> MustCreate(const std::map<std::string, std::string>& params = {}) {
  return engine_testing::MustCreate(kVocoderEngineName, params);
}

Collected OneShot(const std::vector<int32_t>& codes, uint32_t max_tokens = 100000) {
  std::unique_ptr<Engine> engine = MustCreate();
  EXPECT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(codes)}, true, max_tokens)).ok());
  return RunToCompletion(engine.get())["r"];
}

double Seconds(const std::string& pcm) { return static_cast<double>(pcm.size()) / 2 / 24000; }

TEST(VocoderSpeechTest, SpeaksTheCodesAt24kHz) {
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(TextCodes())}, true, 100000)).ok());
  absl::StatusOr<std::vector<v1::RequestOutput>> first = engine->Step();
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  const v1::AudioChunk& chunk = (*first)[0].payloads(0).audio();
  EXPECT_EQ(chunk.sample_rate_hz(), 24000);
  EXPECT_EQ(chunk.channels(), 1);
  // The first step speaks the first clause ("Hello,") and sends up to 0.5 s.
  EXPECT_GT(chunk.pcm_s16le().size(), 0u);
  EXPECT_LE(chunk.pcm_s16le().size(), 2u * 24000 * kChunkMs / 1000);

  Collected rest = RunToCompletion(engine.get())["r"];
  EXPECT_EQ(rest.finish_reason, v1::FINISH_REASON_STOP);
  const std::string pcm = chunk.pcm_s16le() + rest.pcm;
  int peak = 0;
  for (int16_t s : PcmSamples(pcm)) peak = std::max(peak, std::abs(static_cast<int>(s)));
  EXPECT_GT(peak, 32767 / 10);  // speech, not silence
  // As long as espeak-ng speaking the text itself.
  const double direct =
      static_cast<double>(MustGetEspeak().Speak(kText)->size()) / MustGetEspeak().sample_rate_hz();
  EXPECT_NEAR(Seconds(pcm) / direct, 1.0, 0.1) << Seconds(pcm) << " s vs " << direct << " s";
}

TEST(VocoderSpeechTest, ClausesArePausedApart) {
  // Two clauses: each spoken alone, with espeak-ng's pause after '.' between.
  std::vector<int32_t> clock;
  AppendPhonemeCodes(MustGetEspeak().Phonemes("clock", kPhonemeSeparator)[0], &clock);
  std::vector<int32_t> codes = clock;
  codes.push_back(ClauseEndCode('.'));
  const double one = Seconds(OneShot(codes).pcm);
  codes.insert(codes.end(), clock.begin(), clock.end());
  codes.push_back(ClauseEndCode('.'));
  const double pause = static_cast<double>(*MustGetEspeak().PauseAfter('.')) / 22050;
  EXPECT_NEAR(Seconds(OneShot(codes).pcm), 2 * one + pause, 0.002);
}

TEST(VocoderSpeechTest, DeterministicAndChunkingDoesNotChangeTheAudio) {
  const std::vector<int32_t> codes = TextCodes();
  const Collected one_shot = OneShot(codes);
  OneShot({5, 6, 40, 41, ClauseEndCode('!')});
  EXPECT_EQ(OneShot(codes).pcm, one_shot.pcm);

  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {}, false, 100000)).ok());
  EXPECT_FALSE(engine->HasWork());
  std::map<std::string, Collected> out;
  for (size_t i = 0; i < codes.size(); ++i) {
    ASSERT_TRUE(engine->AppendInput("r", {TokensPayload({codes[i]})}, false).ok());
    if (i % 3 == 1 && engine->HasWork()) engine_testing::Collect(*engine->Step(), &out);
  }
  while (engine->HasWork()) engine_testing::Collect(*engine->Step(), &out);
  EXPECT_FALSE(out["r"].finished);  // all spoken, waiting for `last`
  ASSERT_TRUE(engine->AppendInput("r", {}, true).ok());
  engine_testing::Collect(*engine->Step(), &out);
  EXPECT_TRUE(out["r"].finished);
  EXPECT_EQ(out["r"].finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_TRUE(out["r"].pcm == one_shot.pcm) << out["r"].pcm.size() << " vs " << one_shot.pcm.size();
}

// The extra parameter `voice` picks an espeak-ng variant for that request
// alone: another voice, as deterministic, and an unknown one is refused.
TEST(VocoderSpeechTest, AVoicePerRequest) {
  const Espeak& espeak = MustGetEspeak();
  EXPECT_THAT(espeak.variants(), ::testing::IsSupersetOf({"m3", "f2", "croak"}));
  const std::vector<int32_t> codes = TextCodes();
  auto speak = [&](const std::string& voice) {
    std::unique_ptr<Engine> engine = MustCreate();
    EngineRequest request = MakeRequest("r", {TokensPayload(codes)}, true, 100000);
    if (!voice.empty()) (*request.params.mutable_extra())["voice"] = voice;
    EXPECT_TRUE(engine->Add(request).ok());
    return RunToCompletion(engine.get())["r"];
  };
  const Collected plain = speak("");
  const Collected m3 = speak("m3");
  const Collected f2 = speak("f2");
  EXPECT_EQ(plain.pcm, OneShot(codes).pcm);
  EXPECT_EQ(m3.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_GT(Seconds(m3.pcm), 1.0);
  EXPECT_NE(m3.pcm, plain.pcm);
  EXPECT_NE(f2.pcm, m3.pcm);
  EXPECT_EQ(speak("m3").pcm, m3.pcm);
  // A breathy variant (f2) mixes in noise from the C library's rand(): what
  // else the process drew from it must not change the speech.
  for (int i = 0; i < 5; ++i) std::rand();
  EXPECT_TRUE(speak("f2").pcm == f2.pcm) << "f2 spoke differently after rand() was called";
  // The process's own voice is untouched: the default speaks as before.
  EXPECT_EQ(speak("").pcm, plain.pcm);

  std::unique_ptr<Engine> engine = MustCreate();
  EngineRequest bad = MakeRequest("r", {TokensPayload(codes)});
  (*bad.params.mutable_extra())["voice"] = "nobody";
  const absl::Status refused = engine->Validate(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("extra parameter voice: expected one of Alex, "));
  EXPECT_THAT(std::string(CreateVocoderEngine({{"sound", "tones"}})
                              .value()
                              ->Validate(MakeRequest("r", {TokensPayload({1})}))
                              .message()),
              IsEmpty());
}

// The extra parameter `speed` speaks a request faster or slower (espeak-ng's
// rate, and the pauses between clauses), as deterministic; a speed espeak-ng
// cannot speak is refused, naming the parameter.
TEST(VocoderSpeechTest, ASpeedPerRequest) {
  const std::vector<int32_t> codes = TextCodes();
  auto speak = [&](const std::string& speed) {
    std::unique_ptr<Engine> engine = MustCreate();
    EngineRequest request = MakeRequest("r", {TokensPayload(codes)}, true, 100000);
    if (!speed.empty()) (*request.params.mutable_extra())["speed"] = speed;
    EXPECT_TRUE(engine->Add(request).ok());
    return RunToCompletion(engine.get())["r"];
  };
  const Collected plain = speak("");
  const Collected fast = speak("2");
  const Collected slow = speak("0.5");
  EXPECT_EQ(speak("1").pcm, plain.pcm);  // 1 is espeak-ng's own rate.
  EXPECT_EQ(fast.finish_reason, v1::FINISH_REASON_STOP);
  // Twice as fast is about half as long (words take less, and so do pauses).
  EXPECT_GT(Seconds(fast.pcm), 0.35 * Seconds(plain.pcm));
  EXPECT_LT(Seconds(fast.pcm), 0.7 * Seconds(plain.pcm));
  EXPECT_GT(Seconds(slow.pcm), 1.5 * Seconds(plain.pcm));
  EXPECT_EQ(speak("2").pcm, fast.pcm);

  std::unique_ptr<Engine> engine = MustCreate();
  for (const char* speed : {"3", "0.25", "fast"}) {
    EngineRequest bad = MakeRequest("r", {TokensPayload(codes)});
    (*bad.params.mutable_extra())["speed"] = speed;
    const absl::Status refused = engine->Validate(bad);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << speed;
    EXPECT_THAT(std::string(refused.message()),
                HasSubstr("extra parameter speed: expected a number in [0.5, 2.5]"))
        << speed;
    EXPECT_EQ(ErrorField(refused), "params.extra.speed") << speed;
  }
}

TEST(VocoderSpeechTest, WaitsForAClauseEnd) {
  std::vector<int32_t> codes;
  AppendPhonemeCodes(MustGetEspeak().Phonemes("Hello", kPhonemeSeparator)[0], &codes);
  std::unique_ptr<Engine> engine = MustCreate();
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(codes)}, false)).ok());
  EXPECT_FALSE(engine->HasWork());
  ASSERT_TRUE(engine->AppendInput("r", {TokensPayload({ClauseEndCode('!')})}, false).ok());
  EXPECT_TRUE(engine->HasWork());
  // Or for the input's end, which ends the clause as a '.' would.
  std::unique_ptr<Engine> unended = MustCreate();
  ASSERT_TRUE(unended->Add(MakeRequest("r", {TokensPayload(codes)}, true)).ok());
  codes.push_back(ClauseEndCode('.'));
  EXPECT_EQ(RunToCompletion(unended.get())["r"].pcm, OneShot(codes).pcm);
}

TEST(VocoderSpeechTest, CodesThatAreNoPhonemesAreSilent) {
  for (const std::vector<int32_t>& codes :
       {std::vector<int32_t>{}, std::vector<int32_t>{ClauseEndCode('.'), kWordBreakCode},
        std::vector<int32_t>{-1, 100000, PhonemeCodeCount(), ClauseEndCode(',')}}) {
    const Collected out = OneShot(codes);
    EXPECT_TRUE(out.finished);
    EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
    EXPECT_THAT(out.pcm, IsEmpty());
  }
  // Any other codes (a hashed talker's) make some sound, and no error.
  std::vector<int32_t> hashed;
  for (int i = 0; i < 200; ++i) hashed.push_back((i * 37 + 11) % 1024);
  const Collected out = OneShot(hashed);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_STOP);
  EXPECT_FALSE(out.pcm.empty());
}

TEST(VocoderSpeechTest, MaxTokensCapsCodes) {
  const std::vector<int32_t> codes = TextCodes();
  const Collected out = OneShot(codes, /*max_tokens=*/10);
  EXPECT_EQ(out.finish_reason, v1::FINISH_REASON_LENGTH);
  std::vector<int32_t> first_ten(codes.begin(), codes.begin() + 10);
  EXPECT_EQ(out.pcm, OneShot(first_ten).pcm);
}

TEST(VocoderSpeechTest, ParametersAndFaultKnobs) {
  std::unique_ptr<Engine> engine = MustCreate({{"sample_rate_hz", "16000"}});
  ASSERT_TRUE(engine->Add(MakeRequest("r", {TokensPayload(TextCodes())})).ok());
  absl::StatusOr<std::vector<v1::RequestOutput>> first = engine->Step();
  ASSERT_TRUE(first.ok());
  EXPECT_EQ((*first)[0].payloads(0).audio().sample_rate_hz(), 16000);

  EXPECT_THAT(std::string(engine->Validate(MakeRequest("r", {TextPayload("x")})).message()),
              HasSubstr("is text, but this engine accepts tokens"));
  EXPECT_THAT(std::string(CreateVocoderEngine({{"ms_per_code", "40"}}).status().message()),
              HasSubstr("unknown parameter 'ms_per_code'"));
  EXPECT_THAT(std::string(CreateVocoderEngine({{"sound", "beeps"}}).status().message()),
              HasSubstr("parameter sound: expected one of speech, tones"));

  std::unique_ptr<Engine> failing = MustCreate({{"fail_at_step", "2"}});
  ASSERT_TRUE(failing->Add(MakeRequest("r", {TokensPayload(TextCodes())})).ok());
  EXPECT_TRUE(failing->Step().ok());
  EXPECT_EQ(failing->Step().status().code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace omnistage
