// RouteGrpcLogs: gRPC's own lines leave stderr raw no more — they are debug
// lines of common/log — and the last TLS handshake failure's reason is kept.
#include "common/grpc/grpc_log.h"

#include <string>

#include "common/log.h"
#include "gmock/gmock.h"
#include "grpc/support/log.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kHandshake[] =
    "Handshake failed with fatal error SSL_ERROR_SSL: error:0A000086:SSL "
    "routines::certificate verify failed.";

TEST(GrpcLogTest, GrpcLinesAreDebugLinesAndTheHandshakeReasonIsKept) {
  unsetenv("GRPC_VERBOSITY");
  unsetenv("GRPC_TRACE");
  RouteGrpcLogs();
  gpr_log_verbosity_init();  // As grpc_init() does: errors are logged.
  EXPECT_EQ(LastTlsHandshakeFailure(), "");

  InitLogging({"test", LogFormat::kText, LogLevel::kInfo});
  testing::internal::CaptureStderr();
  gpr_log(GPR_ERROR, "%s", kHandshake);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(LastTlsHandshakeFailure(), "certificate verify failed");

  InitLogging({"test", LogFormat::kText, LogLevel::kDebug});
  testing::internal::CaptureStderr();
  gpr_log(GPR_ERROR, "Handshake failed with fatal error SSL_ERROR_SSL: error:0A00010B:SSL "
                     "routines::wrong version number.");
  const std::string debug = testing::internal::GetCapturedStderr();
  EXPECT_THAT(debug, HasSubstr(" debug test grpc grpc_log_test.cc:"));
  EXPECT_THAT(debug, HasSubstr("wrong version number"));
  EXPECT_THAT(debug, Not(HasSubstr("E12")));  // Not gRPC's own prefix.
  EXPECT_EQ(LastTlsHandshakeFailure(), "wrong version number");
  InitLogging({"test", LogFormat::kText, LogLevel::kInfo});
}

}  // namespace
}  // namespace omnistage
