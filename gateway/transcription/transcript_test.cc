// Transcript writes what the recogniser heard, with its times, in each format.
#include "gateway/transcription/transcript.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

v1::TextDelta Utterance(const std::string& text,
                        std::vector<std::tuple<std::string, int64_t, int64_t>> words) {
  v1::TextDelta delta;
  delta.set_text(text);
  for (const auto& [word, start, end] : words) {
    v1::TimedWord* w = delta.add_words();
    w->set_word(word);
    w->set_start_ms(start);
    w->set_end_ms(end);
  }
  return delta;
}

Transcript TwoUtterances() {
  Transcript t(/*audio_ms=*/3725250);  // 1 h 2 min 5.25 s
  EXPECT_EQ(t.Add(Utterance("hello there", {{"hello", 1200, 1610}, {"there", 1610, 2000}})),
            "hello there");
  EXPECT_EQ(t.Add(Utterance(" good bye", {{"good", 3723000, 3723400}, {"bye", 3723400, 3724005}})),
            " good bye");
  EXPECT_EQ(t.Add(Utterance("  ", {})), "");
  return t;
}

TEST(TranscriptTest, JsonAndText) {
  const Transcript t = TwoUtterances();
  EXPECT_EQ(t.text(), "hello there good bye");
  const nlohmann::json j = nlohmann::json::parse(t.Json());
  EXPECT_EQ(j["text"], "hello there good bye");
  EXPECT_EQ(j["usage"]["type"], "duration");
  EXPECT_EQ(j["usage"]["seconds"], 3726);
  EXPECT_EQ(t.Text(), "hello there good bye\n");
}

TEST(TranscriptTest, VerboseJsonHasTheRecognisersTimes) {
  const Transcript t = TwoUtterances();
  nlohmann::json j = nlohmann::json::parse(t.VerboseJson(/*words=*/false));
  EXPECT_EQ(j["task"], "transcribe");
  EXPECT_EQ(j["language"], "english");
  EXPECT_DOUBLE_EQ(j["duration"].get<double>(), 3725.25);
  ASSERT_EQ(j["segments"].size(), 2u);
  EXPECT_EQ(j["segments"][0]["id"], 0);
  EXPECT_DOUBLE_EQ(j["segments"][0]["start"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(j["segments"][0]["end"].get<double>(), 2.0);
  EXPECT_EQ(j["segments"][1]["text"], " good bye");
  EXPECT_FALSE(j.contains("words"));
  j = nlohmann::json::parse(t.VerboseJson(/*words=*/true));
  ASSERT_EQ(j["words"].size(), 4u);
  EXPECT_EQ(j["words"][1]["word"], "there");
  EXPECT_DOUBLE_EQ(j["words"][1]["start"].get<double>(), 1.61);
  EXPECT_DOUBLE_EQ(j["words"][3]["end"].get<double>(), 3724.005);
}

TEST(TranscriptTest, SubtitleCues) {
  const Transcript t = TwoUtterances();
  EXPECT_EQ(t.Srt(),
            "1\n00:00:01,200 --> 00:00:02,000\nhello there\n\n"
            "2\n01:02:03,000 --> 01:02:04,005\ngood bye\n\n");
  EXPECT_EQ(t.Vtt(),
            "WEBVTT\n\n00:00:01.200 --> 00:00:02.000\nhello there\n\n"
            "01:02:03.000 --> 01:02:04.005\ngood bye\n\n");
}

TEST(TranscriptTest, NothingHeard) {
  const Transcript t(500);
  EXPECT_EQ(nlohmann::json::parse(t.Json())["text"], "");
  EXPECT_EQ(nlohmann::json::parse(t.Json())["usage"]["seconds"], 1);
  EXPECT_EQ(t.Srt(), "");
  EXPECT_EQ(t.Vtt(), "WEBVTT\n\n");
  EXPECT_EQ(nlohmann::json::parse(t.VerboseJson(true))["segments"].size(), 0u);
}

// Text without times (passed through) sits where the last utterance ended.
TEST(TranscriptTest, UntimedTextTakesThePreviousEnd) {
  Transcript t(5000);
  t.Add(Utterance("one", {{"one", 100, 400}}));
  t.Add(Utterance("typed", {}));
  ASSERT_EQ(t.segments().size(), 2u);
  EXPECT_EQ(t.segments()[1].start_ms, 400);
  EXPECT_EQ(t.segments()[1].end_ms, 400);
}

}  // namespace
}  // namespace omnistage
