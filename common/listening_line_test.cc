#include "common/listening_line.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::ElementsAre;

TEST(ListeningLineTest, WhatIsWrittenReadsBack) {
  ListeningLine line{50051, "127.0.0.1:50051", {{"metrics_port", "9090"}, {"node", "3fa2c1d0"}}};
  const std::string text = FormatListeningLine(line);
  EXPECT_EQ(text, "listening port=50051 address=127.0.0.1:50051 metrics_port=9090 node=3fa2c1d0");
  absl::StatusOr<ListeningLine> read = FindListeningLine(text + "\n");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->port, 50051);
  EXPECT_EQ(read->address, "127.0.0.1:50051");
  EXPECT_THAT(read->fields, ElementsAre(Pair("metrics_port", "9090"), Pair("node", "3fa2c1d0")));
  EXPECT_EQ(read->Number("metrics_port"), 9090);
  EXPECT_EQ(read->Field("node"), "3fa2c1d0");
  EXPECT_EQ(read->Number("health_port"), 0);
  EXPECT_EQ(read->Field("instance"), "");
}

TEST(ListeningLineTest, FoundAmongOtherOutput) {
  absl::StatusOr<ListeningLine> read = FindListeningLine(
      "starting\nnot a listening port=1 line\nlistening port=7 address=[::1]:7 instance=w1\n"
      "later\n");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->port, 7);
  EXPECT_EQ(read->address, "[::1]:7");
  EXPECT_EQ(read->Field("instance"), "w1");
}

TEST(ListeningLineTest, NotFoundUntilItArrives) {
  EXPECT_EQ(FindListeningLine("").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindListeningLine("starting\n").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(FindListeningLine("starting\nlisten").status().code(), absl::StatusCode::kNotFound);
}

TEST(ListeningLineTest, RefusesAMalformedLineQuotingIt) {
  for (const char* bad : {"listening port=x address=h:1", "listening port=0 address=h:0",
                          "listening port=70000 address=h:1", "listening port=5",
                          "listening port=5 address=h:5 metrics_port"}) {
    absl::StatusOr<ListeningLine> read = FindListeningLine(bad);
    ASSERT_FALSE(read.ok()) << bad;
    EXPECT_EQ(read.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(read.status().message(), HasSubstr(bad));
  }
}

}  // namespace
}  // namespace omnistage
