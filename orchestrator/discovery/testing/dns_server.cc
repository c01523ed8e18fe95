#include "orchestrator/discovery/testing/dns_server.h"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/testing/free_port.h"
#include "orchestrator/discovery/dns_resolver.h"

namespace omnistage {
namespace {

constexpr absl::Duration kWait = absl::Seconds(5);
constexpr char kProbeName[] = "ready.probe.test";
constexpr char kProbeAddress[] = "127.0.0.1";

std::string UserName() {
  const passwd* user = getpwuid(getuid());
  return user != nullptr ? user->pw_name : "root";
}

// The addresses of one family among `ips` (IPv6: with a colon), sorted, once.
std::vector<std::string> OfFamily(const std::vector<std::string>& ips, bool ipv6) {
  std::vector<std::string> family;
  for (const std::string& ip : ips) {
    if ((ip.find(':') != std::string::npos) == ipv6) family.push_back(ip);
  }
  std::sort(family.begin(), family.end());
  family.erase(std::unique(family.begin(), family.end()), family.end());
  return family;
}

std::string Describe(const DnsRecords& records) {
  if (!records.status.ok()) return records.status.ToString();
  return records.addresses.empty() ? "none" : absl::StrJoin(records.addresses, ",");
}

// Whether `records` is what the server says of a family it has `expected` of:
// those addresses, and for none what `mode` says.
bool Answers(DnsServer::Mode mode, const DnsRecords& records,
             const std::vector<std::string>& expected) {
  if (expected.empty() && mode == DnsServer::Mode::kRefusesTheRest) {
    return records.status.code() == absl::StatusCode::kUnavailable;
  }
  return records.status.ok() && records.addresses == expected;
}

// Asks `server` for `name` until each family answers with its part of `ips`.
absl::Status AwaitAnswer(DnsServer::Mode mode, const std::string& server, const std::string& name,
                         const std::vector<std::string>& ips) {
  const std::vector<std::string> a = OfFamily(ips, false);
  const std::vector<std::string> aaaa = OfFamily(ips, true);
  absl::StatusOr<std::unique_ptr<DnsResolver>> resolver =
      DnsResolver::Create({server, absl::Milliseconds(200), 1});
  if (!resolver.ok()) return resolver.status();
  const absl::Time deadline = absl::Now() + kWait;
  std::string last;
  while (absl::Now() < deadline) {
    const DnsAnswer answer = (*resolver)->Lookup(name);
    if (Answers(mode, answer.a, a) && Answers(mode, answer.aaaa, aaaa)) return absl::OkStatus();
    last = absl::StrCat("A ", Describe(answer.a), ", AAAA ", Describe(answer.aaaa));
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("dnsmasq at ", server, " still answers ", name,
                                                  " with ", last));
}

}  // namespace

DnsServer::DnsServer(Mode mode, std::string dir, std::string address,
                     std::unique_ptr<ChildProcess> process)
    : mode_(mode),
      dir_(std::move(dir)),
      address_(std::move(address)),
      process_(std::move(process)) {}

DnsServer::~DnsServer() {
  process_.reset();  // SIGKILL and wait.
  std::remove(absl::StrCat(dir_, "/hosts/records").c_str());
  rmdir(absl::StrCat(dir_, "/hosts").c_str());
  rmdir(dir_.c_str());
}

absl::StatusOr<std::unique_ptr<DnsServer>> DnsServer::Start(Mode mode) {
  if (access(kBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kBinary, " is missing: install dnsmasq-base (./setup.sh does)"));
  }
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/dns.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string hosts = absl::StrCat(dir, "/hosts");
  mkdir(hosts.c_str(), 0700);
  // Until the first Set, the one record is the readiness probe's: an answer
  // with it comes from this dnsmasq (a refusal could be a port nobody serves).
  std::ofstream(absl::StrCat(hosts, "/records")) << kProbeAddress << " " << kProbeName << "\n";
  absl::Status last = absl::UnavailableError("not started");
  // A port found free can be taken before dnsmasq binds it: try a few.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string port = absl::StrCat(FreeLoopbackPort(SOCK_DGRAM));
    std::vector<std::string> argv = {
        kBinary, "--keep-in-foreground", "--conf-file=/dev/null", "--no-resolv", "--no-hosts",
        absl::StrCat("--hostsdir=", hosts), "--listen-address=127.0.0.1", "--bind-interfaces",
        absl::StrCat("--port=", port),
        // Answer from the hosts file, forward nothing, cache nothing.
        "--local-ttl=0", absl::StrCat("--user=", UserName()), "--pid-file=",
    };
    // .test is its own: what the hosts file lacks there does not exist.
    if (mode == Mode::kOwnsTest) argv.push_back("--local=/test/");
    absl::StatusOr<std::unique_ptr<ChildProcess>> process = ChildProcess::Start(argv);
    if (!process.ok()) return process.status();
    const std::string address = absl::StrCat("127.0.0.1:", port);
    last = AwaitAnswer(mode, address, kProbeName, {kProbeAddress});
    if (last.ok()) {
      return std::unique_ptr<DnsServer>(new DnsServer(mode, dir, address, *std::move(process)));
    }
  }
  return last;
}

absl::Status DnsServer::WriteRecords() {
  const std::string path = absl::StrCat(dir_, "/hosts/records");
  const std::string staged = absl::StrCat(dir_, "/records.new");
  {
    std::ofstream out(staged);
    for (const auto& [name, ips] : records_) {
      for (const std::string& ip : ips) out << ip << " " << name << "\n";
    }
    if (!out.good()) return absl::InternalError(absl::StrCat("cannot write ", staged));
  }
  // A rename is one inotify event: dnsmasq never reads a half-written file.
  if (std::rename(staged.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename to ", path));
  }
  return absl::OkStatus();
}

absl::Status DnsServer::Set(const std::string& name, const std::vector<std::string>& ips) {
  if (ips.empty()) {
    records_.erase(name);
  } else {
    records_[name] = ips;
  }
  if (absl::Status written = WriteRecords(); !written.ok()) return written;
  return AwaitAnswer(mode_, address_, name, ips);
}

}  // namespace omnistage
