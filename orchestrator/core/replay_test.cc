#include "orchestrator/core/replay.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Payload Text(const std::string& text) {
  v1::Payload p;
  p.mutable_text()->set_text(text);
  return p;
}
v1::Payload Tokens(std::vector<int32_t> ids) {
  v1::Payload p;
  for (int32_t id : ids) p.mutable_tokens()->add_ids(id);
  return p;
}
v1::Payload Audio(const std::string& pcm) {
  v1::Payload p;
  p.mutable_audio()->set_pcm_s16le(pcm);
  p.mutable_audio()->set_sample_rate_hz(24000);
  return p;
}
v1::Payload Raw(const std::string& bytes) {
  v1::Payload p;
  p.set_raw(bytes);
  return p;
}

google::protobuf::RepeatedPtrField<v1::Payload> Payloads(std::vector<v1::Payload> payloads) {
  google::protobuf::RepeatedPtrField<v1::Payload> out;
  for (v1::Payload& p : payloads) *out.Add() = std::move(p);
  return out;
}

ContentMark Mark(std::vector<v1::Payload> payloads) {
  ContentMark mark;
  for (const v1::Payload& p : payloads) mark.Add(p);
  return mark;
}

TEST(ContentMarkTest, CountsEachKindInItsUnitsWhateverTheCuts) {
  const ContentMark a = Mark({Text("héllo"), Tokens({1, 2}), Audio("abcd"), Raw("x")});
  const ContentMark b =
      Mark({Text("hé"), Tokens({1}), Text("llo"), Audio("ab"), Tokens({2}), Audio("cd"), Raw("y")});
  EXPECT_EQ(a.text_bytes, 6);
  EXPECT_EQ(a.token_ids, 2);
  EXPECT_EQ(a.audio_bytes, 4);
  EXPECT_EQ(a.raw_payloads, 1);
  EXPECT_EQ(a.text_hash, b.text_hash);
  EXPECT_EQ(a.token_hash, b.token_hash);
  EXPECT_EQ(a.audio_hash, b.audio_hash);
  EXPECT_NE(a.text_hash, Mark({Text("hellO")}).text_hash);
  EXPECT_TRUE(ContentMark().empty());
  EXPECT_FALSE(a.empty());
}

TEST(ReplayFilterTest, DropsExactlyWhatWasDeliveredAcrossOutputs) {
  ReplayFilter filter(Mark({Text("Hello"), Tokens({1, 2, 3})}));
  auto first = Payloads({Text("Hel"), Tokens({1})});
  ASSERT_TRUE(filter.Trim(&first).ok());
  EXPECT_EQ(first.size(), 0);
  EXPECT_FALSE(filter.done());
  auto second = Payloads({Text("lo wor"), Tokens({2, 3, 4})});
  ASSERT_TRUE(filter.Trim(&second).ok());
  ASSERT_EQ(second.size(), 2);
  EXPECT_EQ(second[0].text().text(), " wor");
  EXPECT_THAT(second[1].tokens().ids(), ElementsAre(4));
  EXPECT_TRUE(filter.done());
  EXPECT_TRUE(filter.CheckEnded().ok());
  // Once done, everything passes untouched.
  auto third = Payloads({Text("ld")});
  ASSERT_TRUE(filter.Trim(&third).ok());
  EXPECT_EQ(third[0].text().text(), "ld");
}

TEST(ReplayFilterTest, KeepsThePayloadOrderAndDropsWholeRawPayloadsByCount) {
  ReplayFilter filter(Mark({Audio("ab"), Raw("stamp1")}));
  auto out = Payloads({Raw("stamp2"), Audio("abc"), Raw("stamp3"), Text("t")});
  ASSERT_TRUE(filter.Trim(&out).ok());
  ASSERT_EQ(out.size(), 3);
  EXPECT_EQ(out[0].audio().pcm_s16le(), "c");
  EXPECT_EQ(out[0].audio().sample_rate_hz(), 24000);
  EXPECT_EQ(out[1].raw(), "stamp3");
  EXPECT_EQ(out[2].text().text(), "t");
}

TEST(ReplayFilterTest, ADifferentReplayIsDataLoss) {
  ReplayFilter filter(Mark({Tokens({1, 2})}));
  auto out = Payloads({Tokens({1, 7, 3})});
  absl::Status status = filter.Trim(&out);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("first 2 token ids differ"));
}

TEST(ReplayFilterTest, AReplayThatEndsShortIsDataLoss) {
  ReplayFilter filter(Mark({Text("Hello")}));
  auto out = Payloads({Text("He")});
  ASSERT_TRUE(filter.Trim(&out).ok());
  absl::Status status = filter.CheckEnded();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(status.message(), HasSubstr("2 of 5 bytes of text"));
}

TEST(StageReplayTest, JoinsInputOfOneKindInOrder) {
  StageReplay replay;
  for (const v1::Payload& p : {Text("a"), Text("b"), Tokens({1}), Tokens({2}), Text("c"),
                               Audio("xy"), Audio("z"), Raw("r"), Raw("s")}) {
    replay.KeepInput(p);
  }
  v1::Payload other_rate = Audio("q");
  other_rate.mutable_audio()->set_sample_rate_hz(16000);
  replay.KeepInput(other_rate);
  ASSERT_EQ(replay.input.size(), 7u);
  EXPECT_EQ(replay.input[0].text().text(), "ab");
  EXPECT_THAT(replay.input[1].tokens().ids(), ElementsAre(1, 2));
  EXPECT_EQ(replay.input[2].text().text(), "c");
  EXPECT_EQ(replay.input[3].audio().pcm_s16le(), "xyz");
  EXPECT_EQ(replay.input[4].raw(), "r");
  EXPECT_EQ(replay.input[5].raw(), "s");
  EXPECT_EQ(replay.input[6].audio().sample_rate_hz(), 16000);
}

TEST(StageReplayTest, KeepsWhatWasProducedOnePayloadPerKind) {
  StageReplay replay;
  int64_t kept = 0;
  for (const v1::Payload& p :
       {Text("a"), Tokens({1}), Text("b"), Tokens({2, 3}), Audio("xy"), Audio("z"), Raw("r")}) {
    kept += replay.KeepProduced(p);
  }
  EXPECT_GT(kept, 0);
  std::vector<v1::Payload> produced = replay.Produced();
  ASSERT_EQ(produced.size(), 4u);
  EXPECT_EQ(produced[0].text().text(), "ab");
  EXPECT_THAT(produced[1].tokens().ids(), ElementsAre(1, 2, 3));
  EXPECT_EQ(produced[2].audio().pcm_s16le(), "xyz");
  EXPECT_EQ(produced[2].audio().sample_rate_hz(), 24000);
  EXPECT_EQ(produced[3].raw(), "r");
  replay.Clear();
  EXPECT_TRUE(replay.Produced().empty());
}

}  // namespace
}  // namespace omnistage
