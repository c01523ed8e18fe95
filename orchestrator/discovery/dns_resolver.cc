#include "orchestrator/discovery/dns_resolver.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <poll.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

// Records read from one answer; a headless Service lists one per ready pod.
constexpr int kMaxRecords = 4096;

// What one query (A or AAAA) found.
struct Query {
  bool done = false;
  int status = ARES_SUCCESS;
  std::vector<std::string> addresses;
};

// Reads the records of one answer into `query`; `parse` is c-ares' parser of
// that record type.
template <typename Record, typename Address>
void ReadRecords(const unsigned char* answer, int length, int family,
                 int (*parse)(const unsigned char*, int, hostent**, Record*, int*),
                 Address Record::*address, Query* query) {
  std::vector<Record> records(kMaxRecords);
  int count = kMaxRecords;
  query->status = parse(answer, length, nullptr, records.data(), &count);
  if (query->status != ARES_SUCCESS) return;
  char text[INET6_ADDRSTRLEN];
  for (int i = 0; i < count; ++i) {
    if (inet_ntop(family, &(records[i].*address), text, sizeof(text)) != nullptr) {
      query->addresses.emplace_back(text);
    }
  }
}

void OnAnswer(void* arg, int status, int /*timeouts*/, unsigned char* answer, int length,
              int family) {
  Query* query = static_cast<Query*>(arg);
  query->done = true;
  query->status = status;
  if (status != ARES_SUCCESS) return;
  if (family == AF_INET) {
    ReadRecords(answer, length, family, &ares_parse_a_reply, &ares_addrttl::ipaddr, query);
  } else {
    ReadRecords(answer, length, family, &ares_parse_aaaa_reply, &ares_addr6ttl::ip6addr, query);
  }
}

void OnA(void* arg, int status, int timeouts, unsigned char* answer, int length) {
  OnAnswer(arg, status, timeouts, answer, length, AF_INET);
}

void OnAaaa(void* arg, int status, int timeouts, unsigned char* answer, int length) {
  OnAnswer(arg, status, timeouts, answer, length, AF_INET6);
}

// Why a query failed. c-ares 1.18 ends a query that every server refused
// (REFUSED), failed (SERVFAIL, NOTIMP) or could not be reached for, after its
// tries, with ARES_ECONNREFUSED, whose text ("Could not contact DNS servers")
// names only the last.
std::string Reason(int status) {
  if (status == ARES_ECONNREFUSED) {
    return "no server answered it: each refused it (REFUSED), failed it (SERVFAIL) or could "
           "not be reached";
  }
  return ares_strerror(status);
}

// The records one query found, or why it failed.
DnsRecords RecordsOf(const std::string& name, const char* type, Query query) {
  DnsRecords records;
  if (query.status == ARES_ENOTFOUND) {
    records.no_such_name = true;
  } else if (query.status != ARES_SUCCESS && query.status != ARES_ENODATA) {
    const std::string message =
        absl::StrCat("DNS lookup of ", name, " (", type, "): ", Reason(query.status));
    records.status = query.status == ARES_ETIMEOUT ? absl::DeadlineExceededError(message)
                                                   : absl::UnavailableError(message);
    return records;
  }
  records.addresses = std::move(query.addresses);
  std::sort(records.addresses.begin(), records.addresses.end());
  records.addresses.erase(std::unique(records.addresses.begin(), records.addresses.end()),
                          records.addresses.end());
  return records;
}

}  // namespace

struct DnsResolver::Channel {
  ares_channel channel = nullptr;
  ~Channel() {
    if (channel != nullptr) ares_destroy(channel);
  }
};

absl::StatusOr<std::unique_ptr<DnsResolver>> DnsResolver::Create(
    const DnsResolverOptions& options) {
  static std::once_flag init_once;
  static int init_status = ARES_SUCCESS;
  std::call_once(init_once, [] { init_status = ares_library_init(ARES_LIB_INIT_ALL); });
  if (init_status != ARES_SUCCESS) {
    return absl::InternalError(absl::StrCat("c-ares: ", ares_strerror(init_status)));
  }
  auto channel = std::make_unique<Channel>();
  ares_options ares{};
  ares.timeout = static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(options.timeout)));
  ares.tries = std::max(1, options.tries);
  const int status =
      ares_init_options(&channel->channel, &ares, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES);
  if (status != ARES_SUCCESS) {
    return absl::InternalError(absl::StrCat("c-ares: cannot start: ", ares_strerror(status)));
  }
  if (!options.server.empty()) {
    const int set = ares_set_servers_ports_csv(channel->channel, options.server.c_str());
    if (set != ARES_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat("DNS server '", options.server,
                                                     "': expected host:port (", ares_strerror(set),
                                                     ")"));
    }
  }
  return std::unique_ptr<DnsResolver>(new DnsResolver(std::move(channel)));
}

DnsResolver::DnsResolver(std::unique_ptr<Channel> channel) : channel_(std::move(channel)) {}

DnsResolver::~DnsResolver() = default;

DnsAnswer DnsResolver::Lookup(const std::string& name) {
  ares_channel channel = channel_->channel;
  Query a, aaaa;
  ares_search(channel, name.c_str(), ns_c_in, ns_t_a, &OnA, &a);
  ares_search(channel, name.c_str(), ns_c_in, ns_t_aaaa, &OnAaaa, &aaaa);
  // c-ares drives its own retries and timeouts; this loop only waits for its
  // sockets (poll: the process may hold descriptors past select's limit).
  while (!a.done || !aaaa.done) {
    ares_socket_t sockets[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel, sockets, ARES_GETSOCK_MAXNUM);
    std::vector<pollfd> fds;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      short events = 0;
      if (ARES_GETSOCK_READABLE(bits, i)) events |= POLLIN;
      if (ARES_GETSOCK_WRITABLE(bits, i)) events |= POLLOUT;
      if (events != 0) fds.push_back(pollfd{sockets[i], events, 0});
    }
    timeval wait{};
    timeval* next = ares_timeout(channel, nullptr, &wait);
    const int timeout_ms =
        next == nullptr ? 100 : static_cast<int>(next->tv_sec * 1000 + next->tv_usec / 1000);
    const int ready = poll(fds.data(), fds.size(), timeout_ms);
    if (ready <= 0) {
      ares_process_fd(channel, ARES_SOCKET_BAD, ARES_SOCKET_BAD);  // Timeouts.
      continue;
    }
    for (const pollfd& fd : fds) {
      if (fd.revents == 0) continue;
      const bool readable = (fd.revents & (POLLIN | POLLERR | POLLHUP)) != 0;
      const bool writable = (fd.revents & POLLOUT) != 0;
      ares_process_fd(channel, readable ? fd.fd : ARES_SOCKET_BAD,
                      writable ? fd.fd : ARES_SOCKET_BAD);
    }
  }
  DnsAnswer answer;
  answer.a = RecordsOf(name, "A", std::move(a));
  answer.aaaa = RecordsOf(name, "AAAA", std::move(aaaa));
  return answer;
}

}  // namespace omnistage
