#include "common/grpc/service_process.h"

#include <signal.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

TEST(StopSignalsTest, ABlockedSignalWaitsForWait) {
  StopSignals signals(SIGUSR2);
  EXPECT_EQ(signals.WaitFor(absl::Milliseconds(10)), 0);
  raise(SIGTERM);  // Blocked: pending, not fatal.
  EXPECT_EQ(signals.Wait(), SIGTERM);
  raise(SIGUSR2);
  EXPECT_EQ(signals.WaitFor(absl::Seconds(5)), SIGUSR2);
  raise(SIGINT);
  EXPECT_EQ(signals.Wait(), SIGINT);
}

TEST(StopSignalsTest, NamesTheSignals) {
  EXPECT_EQ(StopSignals::Name(SIGTERM), "SIGTERM");
  EXPECT_EQ(StopSignals::Name(SIGINT), "SIGINT");
  EXPECT_EQ(StopSignals::Name(SIGUSR1), absl::StrCat("signal ", SIGUSR1));
}

TEST(StopSignalsDeathTest, ASecondSignalStopsAtOnce) {
  EXPECT_EXIT(
      {
        StopSignals signals(SIGUSR2);
        raise(SIGTERM);
        signals.Wait();
        signals.StopAtOnceOnNext();
        raise(SIGUSR2);  // Still blocked, still waited for.
        if (signals.Wait() != SIGUSR2) _exit(1);
        raise(SIGTERM);
        _exit(0);  // Not reached: the default action ends the process.
      },
      ::testing::KilledBySignal(SIGTERM), "");
}

TEST(SetUpLoggingTest, ABadValueNamesItsFlag) {
  absl::Status bad = SetUpLogging("test", "xml", "info");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("--log_format"));
  EXPECT_TRUE(SetUpLogging("test", "text", "info").ok());
}

TEST(StartRefusedTest, OneLineAndExitCodeTwo) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(StartRefused("gateway", "--model is empty"), 2);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "gateway: --model is empty\n");
}

}  // namespace
}  // namespace omnistage
