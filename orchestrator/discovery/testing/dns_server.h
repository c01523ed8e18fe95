// DnsServer: a real DNS server for tests — Debian's dnsmasq on a loopback port,
// answering for names under .test from a hosts file the test rewrites.
//
//   auto dns = DnsServer::Start();                       // 127.0.0.1:<free port>
//   ASSERT_TRUE((*dns)->Set("talker.omni.test", {"127.0.0.2", "127.0.0.3"}).ok());
//   ... the code under test resolves through (*dns)->address() ...
//   (*dns)->Set("talker.omni.test", {});                 // the name goes away
//
// Names outside .test are refused (nothing is ever forwarded off the machine).
// Started with DnsServer::Mode::kRefusesTheRest, it refuses whatever its hosts
// file does not hold, a record type a name lacks included, as a resolver with
// no upstream does:
//
//   auto dns = DnsServer::Start(DnsServer::Mode::kRefusesTheRest);
//   (*dns)->Set("talker.omni.test", {"127.0.0.2"});  // A: 127.0.0.2, AAAA: REFUSED
//
// The server is stopped by PID when the object goes (ChildProcess), and dies
// with the thread that started it.
#ifndef OMNISTAGE_ORCHESTRATOR_DISCOVERY_TESTING_DNS_SERVER_H_
#define OMNISTAGE_ORCHESTRATOR_DISCOVERY_TESTING_DNS_SERVER_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/testing/child_process.h"

namespace omnistage {

class DnsServer {
 public:
  static constexpr char kBinary[] = "/usr/sbin/dnsmasq";

  // What it answers for a query its hosts file holds no record for.
  enum class Mode {
    // It owns .test (--local=/test/): a record type a name lacks is an empty
    // answer (NOERROR, no record: NODATA), a name it lacks NXDOMAIN.
    kOwnsTest,
    // It owns nothing: it would forward such a query, has no server to forward
    // to (--no-resolv) and answers REFUSED — for the AAAA query of a name with
    // only A records (and the A query of one with only AAAA), and for a name it
    // lacks.
    kRefusesTheRest,
  };

  // FAILED_PRECONDITION when dnsmasq is not installed (setup.sh installs it).
  static absl::StatusOr<std::unique_ptr<DnsServer>> Start(Mode mode = Mode::kOwnsTest);
  ~DnsServer();

  // host:port to send queries to.
  const std::string& address() const { return address_; }
  pid_t pid() const { return process_->pid(); }
  // Replaces the addresses of `name` (IPv4 or IPv6 text; none: the name no
  // longer exists) and returns once the server answers with the new set (each
  // family, as the mode says for a family with none).
  absl::Status Set(const std::string& name, const std::vector<std::string>& ips);

 private:
  DnsServer(Mode mode, std::string dir, std::string address, std::unique_ptr<ChildProcess> process);
  absl::Status WriteRecords();

  const Mode mode_;
  const std::string dir_;
  const std::string address_;
  std::unique_ptr<ChildProcess> process_;
  std::map<std::string, std::vector<std::string>> records_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_ORCHESTRATOR_DISCOVERY_TESTING_DNS_SERVER_H_
