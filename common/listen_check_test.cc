// CheckCanListen on loopback: a free port and port 0 pass; a port someone
// listens on, a malformed address and an unknown host are refused with the
// address in the message.
#include "common/listen_check.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

TEST(ListenCheckTest, TakenPortsAndBadAddressesAreRefused) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string taken = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));

  const absl::Status in_use = CheckCanListen(taken);
  EXPECT_EQ(in_use.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(in_use.message()),
              HasSubstr(absl::StrCat("cannot listen on ", taken, ": Address already in use")));
  // The fix, and the flag when the program names it.
  EXPECT_THAT(std::string(in_use.message()),
              HasSubstr("; another process holds that port: stop it, or choose another port"));
  const absl::Status flagged =
      CheckCanListenAll({{"--metrics_listen", ""}, {"--listen", "127.0.0.1:0"},
                         {"--health_listen", taken}});
  EXPECT_EQ(std::string(flagged.message()),
            absl::StrCat("cannot listen on ", taken,
                         " (--health_listen): Address already in use; another process holds "
                         "that port: stop it, or give --health_listen another port (0 picks a "
                         "free one)"));
  close(fd);
  EXPECT_TRUE(CheckCanListen(taken).ok());  // Free again.
  EXPECT_TRUE(CheckCanListenAll({{"--listen", taken}, {"--metrics_listen", ""}}).ok());

  EXPECT_TRUE(CheckCanListen("127.0.0.1:0").ok());
  EXPECT_EQ(CheckCanListen("50051").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckCanListen("no-such-host.invalid:50051").code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace omnistage
