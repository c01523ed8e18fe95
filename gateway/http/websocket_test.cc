// WebSocket: the handshake's answer (pure), then frames both ways through a
// real HttpServer on loopback, a client written with plain sockets: a
// message and its echo, a ping answered, the close handshake, a message past
// the limit closed with 1009, and clients that vanish without a close told
// once each and costing nothing once gone (the HTTP connection is freed and
// no longer counted).
#include "gateway/http/websocket.h"

#include <arpa/inet.h>
#include <malloc.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gateway/http/http_server.h"
#include "gateway/http/websocket_handshake.h"
#include "gtest/gtest.h"

namespace omnistage {
namespace {

TEST(WebSocketHandshakeTest, AcceptIsTheRfcsExample) {
  // RFC 6455, 1.3.
  EXPECT_EQ(WebSocketAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

TEST(WebSocketHandshakeTest, AcceptsAWellFormedUpgrade) {
  WebSocketRequest request{"GET", "websocket", "keep-alive, Upgrade", "13",
                           "dGhlIHNhbXBsZSBub25jZQ=="};
  std::variant<std::string, ApiError> head = AcceptWebSocket(request);
  ASSERT_TRUE(std::holds_alternative<std::string>(head));
  EXPECT_EQ(std::get<std::string>(head),
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
}

TEST(WebSocketHandshakeTest, RefusesMalformedUpgrades) {
  const WebSocketRequest good{"GET", "WebSocket", "Upgrade", "13", "dGhlIHNhbXBsZSBub25jZQ=="};
  auto status = [](WebSocketRequest request) {
    std::variant<std::string, ApiError> head = AcceptWebSocket(request);
    return std::holds_alternative<ApiError>(head) ? std::get<ApiError>(head).http_status : 101;
  };
  EXPECT_EQ(status(good), 101);
  WebSocketRequest r = good;
  r.method = "POST";
  EXPECT_EQ(status(r), 400);
  r = good;
  r.upgrade = "";
  EXPECT_FALSE(WantsWebSocket(r));
  EXPECT_EQ(status(r), 400);
  r = good;
  r.connection = "keep-alive";
  EXPECT_EQ(status(r), 400);
  r = good;
  r.version = "8";
  EXPECT_EQ(status(r), 426);
  r = good;
  r.key = "c2hvcnQ=";  // "short": not 16 bytes.
  EXPECT_EQ(status(r), 400);
}

// Upgrades every request and echoes each message; counts the ends.
class EchoServer {
 public:
  explicit EchoServer(WebSocketLimits limits = WebSocketLimits()) {
    auto server = HttpServer::Listen("127.0.0.1:0");
    EXPECT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->OnEvent([this](HttpEvent event) {
      if (event == HttpEvent::kConnectionOpened) open_.fetch_add(1);
      if (event == HttpEvent::kConnectionClosed) open_.fetch_sub(1);
    });
    server_->Serve([this, limits](std::shared_ptr<HttpExchange> x) {
      WebSocketRequest request{x->method(), x->Header("Upgrade"), x->Header("Connection"),
                               x->Header("Sec-WebSocket-Version"), x->Header("Sec-WebSocket-Key")};
      auto head = AcceptWebSocket(request);
      if (!std::holds_alternative<std::string>(head)) return;
      const int id = next_id_++;
      sockets_[id] = WebSocket::Start(
          x->Upgrade(std::get<std::string>(head)), limits,
          [this, id](std::string text) { sockets_[id]->Send(text); },
          [this, id] {
            sockets_.erase(id);
            closed_.fetch_add(1);
          });
    });
  }
  int port() const { return server_->port(); }
  int closed() const { return closed_.load(); }
  int open() const { return open_.load(); }

 private:
  // Loop thread only.
  int next_id_ = 0;
  std::map<int, std::unique_ptr<WebSocket>> sockets_;
  std::atomic<int> closed_{0};
  std::atomic<int> open_{0};
  std::unique_ptr<HttpServer> server_;
};

// A client on a blocking socket: its frames are masked, as RFC 6455 wants.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    const timeval timeout{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~Client() { Close(); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }
  // Sends the upgrade; the 101's head.
  std::string Upgrade() {
    Write("GET /ws HTTP/1.1\r\nHost: test\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
    std::string head;
    while (head.find("\r\n\r\n") == std::string::npos) {
      char c;
      if (read(fd_, &c, 1) != 1) break;
      head += c;
    }
    return head;
  }
  void Frame(uint8_t opcode, const std::string& payload) {
    std::string frame(1, static_cast<char>(0x80 | opcode));
    if (payload.size() < 126) {
      frame += static_cast<char>(0x80 | payload.size());
    } else {
      frame += static_cast<char>(0x80 | 126);
      frame += static_cast<char>(payload.size() >> 8);
      frame += static_cast<char>(payload.size() & 0xff);
    }
    const char mask[4] = {0x12, 0x34, 0x56, 0x78};
    frame.append(mask, 4);
    for (size_t i = 0; i < payload.size(); ++i) frame += static_cast<char>(payload[i] ^ mask[i % 4]);
    Write(frame);
  }
  // The next frame from the server (unmasked): its opcode and payload; -1 on EOF.
  int Next(std::string* payload) {
    uint8_t head[2];
    if (!ReadAll(head, 2)) return -1;
    size_t length = head[1] & 0x7f;
    if (length == 126) {
      uint8_t more[2];
      if (!ReadAll(more, 2)) return -1;
      length = (static_cast<size_t>(more[0]) << 8) | more[1];
    }
    payload->resize(length);
    if (length > 0 && !ReadAll(reinterpret_cast<uint8_t*>(payload->data()), length)) return -1;
    return head[0] & 0x0f;
  }

 private:
  void Write(const std::string& data) {
    ASSERT_EQ(write(fd_, data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  bool ReadAll(uint8_t* data, size_t length) {
    size_t got = 0;
    while (got < length) {
      const ssize_t n = read(fd_, data + got, length - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }
  int fd_ = -1;
};

constexpr uint8_t kText = 1, kClose = 8, kPing = 9, kPong = 10;

void AwaitClosed(const EchoServer& server, int count) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((server.closed() < count || server.open() != 0) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_EQ(server.closed(), count);
  ASSERT_EQ(server.open(), 0) << "HTTP connections still counted open";
}

TEST(WebSocketTest, EchoesPingsAndClosesCleanly) {
  EchoServer server;
  Client client(server.port());
  const std::string head = client.Upgrade();
  EXPECT_NE(head.find("101 Switching Protocols"), std::string::npos) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos);
  std::string payload;
  client.Frame(kText, "hello");
  EXPECT_EQ(client.Next(&payload), kText);
  EXPECT_EQ(payload, "hello");
  const std::string big(3000, 'x');  // A 16-bit length.
  client.Frame(kText, big);
  EXPECT_EQ(client.Next(&payload), kText);
  EXPECT_EQ(payload, big);
  client.Frame(kPing, "are you there");
  EXPECT_EQ(client.Next(&payload), kPong);
  EXPECT_EQ(payload, "are you there");
  client.Frame(kClose, std::string("\x03\xe8", 2));  // 1000.
  EXPECT_EQ(client.Next(&payload), kClose);
  EXPECT_EQ(payload.substr(0, 2), std::string("\x03\xe8", 2));
  EXPECT_EQ(client.Next(&payload), -1);  // Then the server closes the connection.
  AwaitClosed(server, 1);
}

TEST(WebSocketTest, AMessagePastTheLimitIsClosedWith1009) {
  WebSocketLimits limits;
  limits.max_message_bytes = 1024;
  EchoServer server(limits);
  Client client(server.port());
  client.Upgrade();
  client.Frame(kText, std::string(2000, 'y'));
  std::string payload;
  ASSERT_EQ(client.Next(&payload), kClose);
  ASSERT_GE(payload.size(), 2u);
  EXPECT_EQ((static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]), 1009);
  client.Close();
  AwaitClosed(server, 1);
}

size_t HeapInUse() { return mallinfo2().uordblks; }

TEST(WebSocketTest, ClientsThatVanishAreToldOnceAndCostNothing) {
  EchoServer server;
  int left = 0;
  auto vanish = [&] {
    Client client(server.port());
    client.Upgrade();
    client.Frame(kText, "bye");
    std::string payload;
    client.Next(&payload);
    client.Close();  // No close frame.
    ++left;
  };
  for (int i = 0; i < 100; ++i) vanish();  // Warm up libevent's and the allocator's caches.
  AwaitClosed(server, left);
  const size_t before = HeapInUse();
  for (int i = 0; i < 1000; ++i) vanish();
  AwaitClosed(server, left);
  const size_t after = HeapInUse();
  EXPECT_LT(after, before + 256 * 1024) << "heap in use grew from " << before << " to " << after;
}

}  // namespace
}  // namespace omnistage
