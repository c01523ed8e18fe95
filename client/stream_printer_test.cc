// Off a terminal, audio progress goes to stderr at most once a second of wall
// time, however many chunks (or seconds of audio) arrive in between.
#include "client/stream_printer.h"

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

int Lines(const std::string& text) {
  int lines = 0;
  for (char c : text) lines += c == '\n';
  return lines;
}

TEST(StreamPrinterTest, OffATerminalProgressComesOnceASecondOfWallTime) {
  absl::Time now = absl::FromUnixSeconds(1000);
  StreamPrinter printer(/*tty=*/false, [&] { return now; });
  ::testing::internal::CaptureStderr();
  // 233 chunks of 10 ms of audio in 0.5 s: a fast pipeline, nothing yet.
  for (int i = 1; i <= 233; ++i) {
    printer.Audio(i * 0.01);
    now += absl::Milliseconds(2);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  // 3 s of wall time, a chunk every 100 ms: one line a second.
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 30; ++i) {
    now += absl::Milliseconds(100);
    printer.Audio(2.33 + i * 0.1);
  }
  printer.End();
  const std::string progress = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(Lines(progress), 3) << progress;
  EXPECT_TRUE(absl::StrContains(progress, "[audio ")) << progress;
}

}  // namespace
}  // namespace omnistage
