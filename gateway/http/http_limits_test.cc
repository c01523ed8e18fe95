// HttpServer's limits with real sockets on loopback (HttpLimits,
// http_connections.h): slow clients are closed by the request deadline however
// they trickle bytes, a deadline that restarts after each response, too many
// header lines or bytes refused, connections over the caps (per address, in
// all) refused at once while other addresses are served, and libevent's own
// refusals counted. Every limit is small, so each case takes about a second.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gateway/http/http_server.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// A server answering every request 200 "ok", counting what its limits tell.
class LimitedServer {
 public:
  explicit LimitedServer(const HttpLimits& limits) {
    auto server = HttpServer::Listen("127.0.0.1:0", limits);
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->OnEvent([this](HttpEvent event) {
      absl::MutexLock lock(&mu_);
      ++events_[event];
    });
    server_->Serve([](std::shared_ptr<HttpExchange> x) { x->Respond(200, "text/plain", "ok"); });
  }
  // Its last events (each connection's close) are counted while this lives.
  ~LimitedServer() { server_->Stop(); }
  int port() const { return server_->port(); }
  int count(HttpEvent event) {
    absl::MutexLock lock(&mu_);
    return events_[event];
  }
  int open() {
    absl::MutexLock lock(&mu_);
    return events_[HttpEvent::kConnectionOpened] - events_[HttpEvent::kConnectionClosed];
  }
  // Waits up to 5 s for `event` to have been told `n` times.
  bool AwaitCount(HttpEvent event, int n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    while (count(event) < n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
    return count(event) == n;
  }

 private:
  std::unique_ptr<HttpServer> server_;
  absl::Mutex mu_;
  std::map<HttpEvent, int> events_ ABSL_GUARDED_BY(mu_);
};

// A TCP connection from `from` (a loopback address) to the server; closed
// when it goes.
class Client {
 public:
  Client(int port, const char* from = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from, &local.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)), 0) << from;
    sockaddr_in server{};
    server.sin_family = AF_INET;
    server.sin_port = htons(static_cast<uint16_t>(port));
    server.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&server), sizeof(server)), 0);
  }
  ~Client() { close(fd_); }

  bool Send(const std::string& data) {
    return send(fd_, data.data(), data.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(data.size());
  }
  // What arrives until the server closes (or resets) the connection, or until
  // `timeout`; `closed` says whether it closed.
  std::string ReadUntilClosed(absl::Duration timeout, bool* closed) {
    std::string got;
    *closed = false;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) {
        *closed = true;
        break;
      }
      got.append(buffer, static_cast<size_t>(n));
    }
    return got;
  }
  // Reads one whole response to a request that asked for a kept-alive
  // connection (up to `timeout`).
  std::string ReadResponse(absl::Duration timeout) {
    std::string got;
    const absl::Time deadline = absl::Now() + timeout;
    while (absl::Now() < deadline && got.find("\r\n\r\nok") == std::string::npos) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      char buffer[4096];
      const ssize_t n = recv(fd_, buffer, sizeof(buffer), 0);
      if (n <= 0) break;
      got.append(buffer, static_cast<size_t>(n));
    }
    return got;
  }
  // Whether the server closed (or reset) the connection, without waiting.
  bool Closed() {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 0) <= 0) return false;
    char buffer[4096];
    return recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT) <= 0;
  }
  bool ClosedWithin(absl::Duration timeout) {
    bool closed = false;
    ReadUntilClosed(timeout, &closed);
    return closed;
  }

 private:
  int fd_ = -1;
};

constexpr char kGet[] = "GET /x HTTP/1.1\r\nHost: test\r\n\r\n";

// A request that completes is answered 200.
bool Served(int port, const char* from = "127.0.0.1") {
  Client client(port, from);
  client.Send(std::string(kGet));
  return client.ReadResponse(absl::Seconds(5)).rfind("HTTP/1.1 200", 0) == 0;
}

TEST(HttpLimitsTest, SlowClientsAreClosedByTheDeadlineHoweverTheyTrickle) {
  HttpLimits limits;
  limits.request_read_timeout = absl::Milliseconds(600);
  LimitedServer server(limits);
  constexpr int kSlow = 200;
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<Client>(server.port()));
    slow.back()->Send("POST /v1/chat/completions HTTP/1.1\r\nHost: test\r\n");
  }
  const absl::Time start = absl::Now();
  // A byte every 100 ms: each read would restart a timeout between reads.
  std::vector<bool> closed(kSlow, false);
  int open = kSlow;
  while (open > 0 && absl::Now() - start < absl::Seconds(5)) {
    for (int i = 0; i < kSlow; ++i) {
      if (closed[i]) continue;
      if (slow[i]->Closed() || !slow[i]->Send("X")) {
        closed[i] = true;
        --open;
      }
    }
    // A normal request is served throughout.
    EXPECT_TRUE(Served(server.port()));
    absl::SleepFor(absl::Milliseconds(100));
  }
  const absl::Duration took = absl::Now() - start;
  EXPECT_EQ(open, 0) << "slow clients still open after " << took;
  EXPECT_GE(took, absl::Milliseconds(500)) << "closed before the deadline";
  EXPECT_LT(took, absl::Milliseconds(2500));
  EXPECT_TRUE(server.AwaitCount(HttpEvent::kRequestReadTimeout, kSlow));
  const absl::Time settle = absl::Now() + absl::Seconds(5);
  while (server.open() > 0 && absl::Now() < settle) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(server.open(), 0);
}

TEST(HttpLimitsTest, TheDeadlineStartsAgainAfterEachResponse) {
  HttpLimits limits;
  limits.request_read_timeout = absl::Milliseconds(500);
  LimitedServer server(limits);
  Client client(server.port());
  // Three requests on one connection, 300 ms apart: 900 ms in all, each
  // within its own deadline.
  for (int i = 0; i < 3; ++i) {
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(client.Send(kGet));
    ASSERT_EQ(client.ReadResponse(absl::Seconds(2)).rfind("HTTP/1.1 200", 0), 0u) << i;
  }
  // Then idle: closed after the deadline.
  EXPECT_TRUE(client.ClosedWithin(absl::Seconds(2)));
  EXPECT_EQ(server.count(HttpEvent::kRequestReadTimeout), 1);
}

TEST(HttpLimitsTest, TooManyHeaderLinesOrBytesAreRefused) {
  std::string flood = "GET /x HTTP/1.1\r\nHost: test\r\n";
  for (int i = 0; i < 20000; ++i) absl::StrAppend(&flood, "X-", i % 100, ": a\r\n");
  flood += "\r\n";
  ASSERT_GT(flood.size(), 160000u);
  {
    // Past the bytes: libevent's 400.
    HttpLimits limits;
    LimitedServer server(limits);
    Client client(server.port());
    client.Send(flood);
    bool closed = false;
    EXPECT_EQ(client.ReadUntilClosed(absl::Seconds(5), &closed).rfind("HTTP/1.1 400", 0), 0u);
    EXPECT_TRUE(closed);
    EXPECT_TRUE(server.AwaitCount(HttpEvent::kRefusedBadRequest, 1));
  }
  {
    // Within the bytes, past the lines: 431.
    HttpLimits limits;
    limits.max_header_bytes = 1 << 20;
    limits.max_headers = 50;
    LimitedServer server(limits);
    Client client(server.port());
    client.Send(flood);
    bool closed = false;
    const std::string answer = client.ReadUntilClosed(absl::Seconds(5), &closed);
    EXPECT_EQ(answer.rfind("HTTP/1.1 431", 0), 0u) << answer.substr(0, 200);
    EXPECT_NE(answer.find("more than 50 header lines"), std::string::npos);
    EXPECT_TRUE(closed);
    EXPECT_EQ(server.count(HttpEvent::kRefusedMaxHeaders), 1);
    EXPECT_TRUE(Served(server.port()));  // 2 header lines.
  }
}

// libevent's own answers are counted, and go out as OpenAI-shaped JSON
// errors, not its HTML pages.
TEST(HttpLimitsTest, LibeventsOwnAnswersAreCountedAndInOpenAIsShape) {
  HttpLimits limits;
  limits.max_body_bytes = 1 << 20;
  LimitedServer server(limits);
  const struct {
    std::string request;
    const char* status;
    HttpEvent event;
    const char* error;  // in the JSON body
  } cases[] = {
      {"garbage\r\n\r\n", "HTTP/1.1 400", HttpEvent::kRefusedBadRequest, R"("code":"bad_request")"},
      {"GET /" + std::string(200000, 'a') + " HTTP/1.1\r\n\r\n", "HTTP/1.1 400",
       HttpEvent::kRefusedBadRequest, "a line and headers past 32768 bytes"},
      {"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 100000000\r\n\r\n", "HTTP/1.1 413",
       HttpEvent::kRefusedBodyTooLarge,
       "the request body is larger than the gateway takes (1048576 bytes)"},
      {"PUT /x HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 501",
       HttpEvent::kRefusedMethod, R"("code":"method_not_supported")"},
  };
  // Its "100 Continue" is no refusal.
  {
    Client client(server.port());
    client.Send("POST /x HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
    absl::SleepFor(absl::Milliseconds(100));
    client.Send("{}");
    const std::string answer = client.ReadResponse(absl::Seconds(5));
    EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
    EXPECT_EQ(server.count(HttpEvent::kRefusedBadRequest), 0);
  }
  std::map<HttpEvent, int> want;
  for (const auto& c : cases) {
    Client client(server.port());
    client.Send(c.request);
    bool closed = false;
    const std::string answer = client.ReadUntilClosed(absl::Seconds(5), &closed);
    const size_t body = answer.find("\r\n\r\n") + 4;
    EXPECT_EQ(answer.rfind(c.status, 0), 0u) << c.request.substr(0, 40);
    EXPECT_NE(answer.find("Content-Type: application/json\r\n"), std::string::npos) << answer;
    EXPECT_EQ(answer.find(R"({"error":{)"), body) << answer;
    EXPECT_NE(answer.find(R"("type":"invalid_request_error")"), std::string::npos) << answer;
    EXPECT_NE(answer.find(c.error), std::string::npos) << answer;
    EXPECT_EQ(answer.find("<html"), std::string::npos) << answer;
    // The length says where the body ends.
    EXPECT_NE(answer.find(absl::StrCat("Content-Length: ", answer.size() - body, "\r\n")),
              std::string::npos)
        << answer;
    EXPECT_TRUE(closed);
    EXPECT_TRUE(server.AwaitCount(c.event, ++want[c.event])) << c.request.substr(0, 40);
  }
}

// Waits until the server holds `n` connections.
bool AwaitOpen(LimitedServer& server, int n) {
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (server.open() != n && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  return server.open() == n;
}

TEST(HttpLimitsTest, ConnectionsOverTheCapOfAnAddressAreRefusedAtOnce) {
  HttpLimits limits;
  limits.max_connections_per_address = 5;
  LimitedServer server(limits);
  std::vector<std::unique_ptr<Client>> held;
  for (int i = 0; i < 5; ++i) held.push_back(std::make_unique<Client>(server.port()));
  ASSERT_TRUE(AwaitOpen(server, 5));
  // One more from the same address: a 503 and the close, at once.
  const absl::Time start = absl::Now();
  Client extra(server.port());
  bool closed = false;
  const std::string answer = extra.ReadUntilClosed(absl::Seconds(5), &closed);
  EXPECT_TRUE(closed);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_NE(answer.find("too many connections from 127.0.0.1"), std::string::npos) << answer;
  // One that sends its request at once is refused as well.
  Client eager(server.port());
  eager.Send(kGet);
  EXPECT_TRUE(eager.ClosedWithin(absl::Seconds(2)));
  EXPECT_EQ(server.count(HttpEvent::kRefusedMaxConnectionsPerAddress), 2);
  // Another address is served; the held ones still are too.
  EXPECT_TRUE(Served(server.port(), "127.0.0.2"));
  held.back()->Send(kGet);
  EXPECT_EQ(held.back()->ReadResponse(absl::Seconds(2)).rfind("HTTP/1.1 200", 0), 0u);
  // Closing one makes room.
  held.front().reset();
  ASSERT_TRUE(AwaitOpen(server, 4));
  EXPECT_TRUE(Served(server.port()));
}

TEST(HttpLimitsTest, ConnectionsOverTheTotalCapAreRefusedAtOnce) {
  HttpLimits limits;
  limits.max_connections = 3;
  LimitedServer server(limits);
  Client a(server.port(), "127.0.0.1");
  Client b(server.port(), "127.0.0.2");
  Client c(server.port(), "127.0.0.3");
  ASSERT_TRUE(AwaitOpen(server, 3));
  Client d(server.port(), "127.0.0.4");
  bool closed = false;
  const std::string answer = d.ReadUntilClosed(absl::Seconds(2), &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(answer.rfind("HTTP/1.1 503", 0), 0u) << answer;
  EXPECT_EQ(server.count(HttpEvent::kRefusedMaxConnections), 1);
  a.Send(kGet);
  EXPECT_EQ(a.ReadResponse(absl::Seconds(2)).rfind("HTTP/1.1 200", 0), 0u);
}

}  // namespace
}  // namespace omnistage
