// HttpServer with real sockets on loopback: clients that go away before their
// response ended (mid-stream, or before a whole answer) are told to the
// handler once each, and cost nothing once gone — libevent leaves such a
// request to its user, and a server that forgot it would grow by a request
// (about a kilobyte) per departed client.
#include "gateway/http/http_server.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

// Serves /stream (one event, then holds the stream open) and /hold (never
// answers), keeping each exchange until its client goes.
class HoldingServer {
 public:
  HoldingServer() {
    auto server = HttpServer::Start("127.0.0.1:0", [this](std::shared_ptr<HttpExchange> x) {
      const int id = next_id_++;
      x->OnClose([this, id] {
        held_.erase(id);
        closed_.fetch_add(1);
      });
      if (x->path() == "/stream") {
        x->StartStream(200, "text/event-stream");
        x->Send("data: 1\n\n");
      }
      held_[id] = std::move(x);
    });
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  int port() const { return server_->port(); }
  int closed() const { return closed_.load(); }

 private:
  // Loop thread only.
  int next_id_ = 0;
  std::map<int, std::shared_ptr<HttpExchange>> held_;
  std::atomic<int> closed_{0};
  std::unique_ptr<HttpServer> server_;
};

// Sends a GET for `path`; for /stream reads until the first event came; then
// closes the connection.
void GetAndLeave(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n";
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  if (path == "/stream") {
    std::string got;
    char buffer[1024];
    while (got.find("data: 1") == std::string::npos) {
      const ssize_t n = read(fd, buffer, sizeof(buffer));
      ASSERT_GT(n, 0);
      got.append(buffer, static_cast<size_t>(n));
    }
  }
  close(fd);
}

void AwaitClosed(const HoldingServer& server, int count) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (server.closed() < count && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(server.closed(), count);
}

size_t HeapInUse() { return mallinfo2().uordblks; }

TEST(HttpServerTest, ClientsThatLeaveAreToldOnceAndCostNothing) {
  HoldingServer server;
  int left = 0;
  // Warm up: libevent's and the allocator's own caches settle.
  for (int i = 0; i < 200; ++i, ++left) GetAndLeave(server.port(), i % 2 ? "/stream" : "/hold");
  AwaitClosed(server, left);
  const size_t before = HeapInUse();
  constexpr int kClients = 2000;
  for (int i = 0; i < kClients; ++i, ++left) {
    GetAndLeave(server.port(), i % 2 ? "/stream" : "/hold");
  }
  AwaitClosed(server, left);
  const size_t after = HeapInUse();
  // A request kept per departed client would be some 2 MB here.
  EXPECT_LT(after, before + 256 * 1024) << "heap in use grew from " << before << " to " << after
                                        << " bytes over " << kClients << " departed clients";
}

TEST(HttpServerTest, AnExchangeHeldPastItsConnectionsEndIsLetGo) {
  // A handler that keeps an exchange without asking for its close (as /health
  // does while it asks an orchestrator) while the server stops: the exchange
  // hears the end, and answering it later touches nothing freed.
  std::shared_ptr<HttpExchange> held;
  absl::Notification got;
  auto server = HttpServer::Start("127.0.0.1:0", [&](std::shared_ptr<HttpExchange> x) {
    held = std::move(x);
    got.Notify();
  });
  ASSERT_TRUE(server.ok()) << server.status();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>((*server)->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  const std::string request = "GET /hold HTTP/1.1\r\nHost: test\r\n\r\n";
  ASSERT_EQ(write(fd, request.data(), request.size()), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(got.WaitForNotificationWithTimeout(absl::Seconds(10)));
  (*server)->Stop();
  EXPECT_TRUE(held->done());
  held->Respond(200, "text/plain", "late\n");
  held.reset();
  close(fd);
}

}  // namespace
}  // namespace omnistage
