// DnsServer: a real DNS server for tests — Debian's dnsmasq on a loopback port,
// answering for names under .test from a hosts file the test rewrites.
//
//   auto dns = DnsServer::Start();                       // 127.0.0.1:<free port>
//   ASSERT_TRUE((*dns)->Set("talker.omni.test", {"127.0.0.2", "127.0.0.3"}).ok());
//   ... the code under test resolves through (*dns)->address() ...
//   (*dns)->Set("talker.omni.test", {});                 // the name goes away
//
// Names outside .test are refused (nothing is ever forwarded off the machine).
// The server is stopped by PID when the object goes (ChildProcess), and dies
// with the thread that started it.
#ifndef OMNISTAGE_TESTS_DNS_SERVER_H_
#define OMNISTAGE_TESTS_DNS_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "tests/child_process.h"

namespace omnistage {

class DnsServer {
 public:
  static constexpr char kBinary[] = "/usr/sbin/dnsmasq";

  // FAILED_PRECONDITION when dnsmasq is not installed (setup.sh installs it).
  static absl::StatusOr<std::unique_ptr<DnsServer>> Start();
  ~DnsServer();

  // host:port to send queries to.
  const std::string& address() const { return address_; }
  pid_t pid() const { return process_->pid(); }
  // Replaces the addresses of `name` (IPv4 or IPv6 text; none: the name no
  // longer exists) and returns once the server answers with the new set.
  absl::Status Set(const std::string& name, const std::vector<std::string>& ips);

 private:
  DnsServer(std::string dir, std::string address, std::unique_ptr<ChildProcess> process);
  absl::Status WriteRecords();

  const std::string dir_;
  const std::string address_;
  std::unique_ptr<ChildProcess> process_;
  std::map<std::string, std::vector<std::string>> records_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_TESTS_DNS_SERVER_H_
