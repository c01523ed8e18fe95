#include "common/host_port.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

using ::testing::HasSubstr;

TEST(ParseHostPortTest, ReadsNamesIpv4AndBracketedIpv6) {
  absl::StatusOr<HostPort> name = ParseHostPort("omnistage-talker:50061", PortRule::kDial);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->host, "omnistage-talker");
  EXPECT_EQ(name->port, 50061);
  absl::StatusOr<HostPort> v4 = ParseHostPort("127.0.0.1:1", PortRule::kDial);
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "127.0.0.1");
  absl::StatusOr<HostPort> v6 = ParseHostPort("[fd00::7]:65535", PortRule::kDial);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fd00::7");
  EXPECT_EQ(v6->port, 65535);
  absl::StatusOr<HostPort> mapped = ParseHostPort("[::ffff:127.0.0.1]:80", PortRule::kDial);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  EXPECT_EQ(mapped->host, "::ffff:127.0.0.1");
}

TEST(ParseHostPortTest, PortZeroOnlyForListeners) {
  absl::StatusOr<HostPort> listen = ParseHostPort("[::]:0", PortRule::kListen);
  ASSERT_TRUE(listen.ok()) << listen.status();
  EXPECT_EQ(listen->host, "::");
  EXPECT_EQ(listen->port, 0);
  EXPECT_THAT(ParseHostPort("h:0", PortRule::kDial).status().message(),
              HasSubstr("a port in 1..65535"));
}

TEST(ParseHostPortTest, RefusesWhatIsNotHostPortSayingWhy) {
  struct Case {
    const char* address;
    const char* why;
  };
  const Case cases[] = {
      {"", "no port"},
      {"h", "no port"},
      {"h:", "no port"},
      {":80", "no host"},
      {"h:65536", "a port in 0..65535"},
      {"h:-1", "a port in 0..65535"},
      {"h:+80", "a port in 0..65535"},
      {"h:080000", "a port in 0..65535"},
      {"h: 80", "a port in 0..65535"},
      {"::1:80", "in brackets"},
      {"dns:///h:80", "in brackets"},
      {"[::1:80", "'[' without its ']'"},
      {"[::1]80", "no port"},
      {"[]:80", "IPv6 address in brackets"},
      {"[h]:80", "IPv6 address in brackets"},
      {"h/x:80", "a host name or address"},
      {"h h:80", "a host name or address"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(c.address, PortRule::kListen);
    ASSERT_FALSE(parsed.ok()) << c.address;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr("expected host:port")) << c.address;
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.why)) << c.address;
  }
}

TEST(FormatHostPortTest, BracketsIpv6AndRoundTrips) {
  EXPECT_EQ(FormatHostPort("10.1.2.3", 50061), "10.1.2.3:50061");
  EXPECT_EQ(FormatHostPort("fd00::7", 50061), "[fd00::7]:50061");
  for (const char* address : {"10.1.2.3:7", "[fd00::7]:7", "omnistage-talker:7"}) {
    absl::StatusOr<HostPort> parsed = ParseHostPort(address, PortRule::kDial);
    ASSERT_TRUE(parsed.ok()) << address;
    EXPECT_EQ(FormatHostPort(parsed->host, parsed->port), address);
  }
}

}  // namespace
}  // namespace omnistage
