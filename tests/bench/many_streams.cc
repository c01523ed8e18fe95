#include "tests/bench/many_streams.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "tests/bench/gateway_load.h"
#include "tests/bench/load_generator.h"

namespace omnistage {
namespace bench {

namespace {

// HTTP/1.1's chunked transfer coding, decoded as it comes.
class ChunkedDecoder {
 public:
  // Appends the body bytes `data` carries to `body`; false on a framing error.
  bool Feed(absl::string_view data, std::string* body) {
    while (!data.empty() && state_ != kEnded) {
      if (state_ == kData) {
        const size_t n = std::min(left_, data.size());
        body->append(data.data(), n);
        data.remove_prefix(n);
        left_ -= n;
        if (left_ == 0) state_ = kDataEnd;
        continue;
      }
      // The other states read one CRLF-ended line.
      const size_t eol = data.find('\n');
      line_.append(data.data(), eol == absl::string_view::npos ? data.size() : eol);
      if (eol == absl::string_view::npos) return true;
      data.remove_prefix(eol + 1);
      absl::string_view line = absl::StripSuffix(line_, "\r");
      if (state_ == kDataEnd) {
        if (!line.empty()) return false;
        state_ = kSize;
      } else if (state_ == kTrailer) {
        if (line.empty()) state_ = kEnded;
      } else {
        size_t size = 0;
        if (!absl::SimpleHexAtoi(line.substr(0, line.find(';')), &size)) return false;
        left_ = size;
        state_ = size == 0 ? kTrailer : kData;
      }
      line_.clear();
    }
    return true;
  }
  bool ended() const { return state_ == kEnded; }

 private:
  enum State { kSize, kData, kDataEnd, kTrailer, kEnded };
  State state_ = kSize;
  std::string line_;
  size_t left_ = 0;
};

// RunSwarm's streams and their event loop (one thread, level-triggered epoll).
class Swarm {
 public:
  explicit Swarm(const SwarmOptions& options) : options_(options), streams_(options.streams) {}
  ~Swarm() {
    for (Stream& s : streams_) {
      if (s.fd >= 0) close(s.fd);
    }
    if (epoll_ >= 0) close(epoll_);
  }

  SwarmResult Run() {
    SwarmResult result;
    result.streams = options_.streams;
    epoll_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_ < 0) {
      result.first_error = absl::StrCat("epoll_create1: errno ", errno);
      return result;
    }
    const int64_t begin = NowNs();
    int64_t hold_start = 0;
    int64_t next_sample = 0;
    const int64_t sample_every = absl::ToInt64Nanoseconds(absl::Milliseconds(100));
    std::vector<epoll_event> events(512);
    while (true) {
      const int64_t now = NowNs();
      if (hold_start == 0) {
        while (opened_ < options_.streams && pending_ < options_.max_pending) Open(opened_++);
        if (settled_ == options_.streams ||
            now - begin > absl::ToInt64Nanoseconds(options_.open_timeout)) {
          hold_start = now;
          result.open_seconds = (now - begin) / 1e9;
          result.with_token = with_token_;
          counting_ = true;
          if (options_.sample) options_.sample();
          next_sample = now + sample_every;
        }
      } else if (now - hold_start >= absl::ToInt64Nanoseconds(options_.hold)) {
        if (options_.sample) options_.sample();
        result.hold_seconds = (NowNs() - hold_start) / 1e9;
        break;
      } else if (now >= next_sample) {
        if (options_.sample) options_.sample();
        next_sample += sample_every;
      }
      const int n = epoll_wait(epoll_, events.data(), static_cast<int>(events.size()), 10);
      for (int i = 0; i < n; ++i) Handle(events[i].data.u32, events[i].events);
    }
    result.hold_tokens = hold_tokens_;
    result.failed = failed_;
    result.first_error = first_error_;
    for (const Stream& s : streams_) result.open_at_end += s.fd >= 0 ? 1 : 0;
    return result;
  }

 private:
  struct Stream {
    int fd = -1;
    bool headers_done = false;
    std::string request;
    size_t written = 0;
    std::string head;  // The response's headers as they come.
    ChunkedDecoder chunks;
    SseReader reader;
    int64_t tokens = 0;
  };

  void Open(int index) {
    Stream& s = streams_[index];
    ++pending_;
    const std::string body = ChatBody(index, options_.max_tokens);
    s.request = absl::StrCat(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:", options_.port,
        "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
    s.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) return Fail(s, absl::StrCat("socket: errno ", errno));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(options_.port);
    if (connect(s.fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 &&
        errno != EINPROGRESS) {
      return Fail(s, absl::StrCat("connect: errno ", errno));
    }
    epoll_event event{};
    event.events = EPOLLOUT | EPOLLIN;
    event.data.u32 = static_cast<uint32_t>(index);
    if (epoll_ctl(epoll_, EPOLL_CTL_ADD, s.fd, &event) != 0) {
      Fail(s, absl::StrCat("epoll_ctl: errno ", errno));
    }
  }

  void Handle(uint32_t index, uint32_t events) {
    Stream& s = streams_[index];
    if (s.fd < 0) return;
    if (s.written < s.request.size() && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
      const ssize_t n =
          send(s.fd, s.request.data() + s.written, s.request.size() - s.written, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno != EAGAIN) Fail(s, absl::StrCat("send: errno ", errno));
        return;
      }
      s.written += n;
      if (s.written == s.request.size()) {
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.u32 = index;
        epoll_ctl(epoll_, EPOLL_CTL_MOD, s.fd, &event);
      }
      return;
    }
    if (!(events & (EPOLLIN | EPOLLERR | EPOLLHUP))) return;
    const ssize_t n = recv(s.fd, buffer_, sizeof(buffer_), 0);
    if (n < 0) {
      if (errno != EAGAIN) Fail(s, absl::StrCat("recv: errno ", errno));
      return;
    }
    if (n == 0) {
      if (s.reader.done()) return Close(s);
      return Fail(s, "the gateway closed the connection before data: [DONE]");
    }
    absl::string_view data(buffer_, n);
    if (!s.headers_done) {
      s.head.append(data.data(), data.size());
      const size_t end = s.head.find("\r\n\r\n");
      if (end == std::string::npos) {
        if (s.head.size() > 16384) Fail(s, "response headers past 16 KiB");
        return;
      }
      if (!absl::StartsWith(s.head, "HTTP/1.1 200")) {
        return Fail(s, s.head.substr(0, std::min<size_t>(s.head.size(), 300)));
      }
      if (!absl::StrContains(absl::AsciiStrToLower(s.head.substr(0, end)),
                             "transfer-encoding: chunked")) {
        return Fail(s, "the response is not chunked");
      }
      s.headers_done = true;
      Body(s, absl::string_view(s.head).substr(end + 4));
      return;
    }
    Body(s, data);
  }

  void Body(Stream& s, absl::string_view data) {
    std::string body;
    if (!s.chunks.Feed(data, &body)) return Fail(s, "bad chunked framing");
    const int64_t tokens = s.reader.Feed(body);
    if (counting_) hold_tokens_ += tokens;
    if (tokens > 0 && s.tokens == 0) {
      ++with_token_;
      Settle();
    }
    s.tokens += tokens;
    if (!s.reader.error().empty()) return Fail(s, s.reader.error());
    if (s.reader.done() || s.chunks.ended()) {
      if (s.tokens == 0) return Fail(s, "the stream ended without a token");
      Close(s);
    }
  }

  // The stream has its first token, or never will.
  void Settle() {
    --pending_;
    ++settled_;
  }

  void Fail(Stream& s, const std::string& why) {
    if (failed_++ == 0) first_error_ = why;
    if (s.tokens == 0) Settle();
    Close(s);
  }

  void Close(Stream& s) {
    if (s.fd < 0) return;
    close(s.fd);  // Also takes it out of the epoll set.
    s.fd = -1;
  }

  const SwarmOptions options_;
  std::vector<Stream> streams_;
  int epoll_ = -1;
  int opened_ = 0;
  int pending_ = 0;  // Opened, without a first token yet, not failed.
  int settled_ = 0;  // With a first token, or failed.
  int with_token_ = 0;
  int failed_ = 0;
  bool counting_ = false;  // The hold started: tokens count.
  int64_t hold_tokens_ = 0;
  std::string first_error_;
  char buffer_[1 << 16];
};

}  // namespace

SwarmResult RunSwarm(const SwarmOptions& options) {
  auto swarm = std::make_unique<Swarm>(options);  // Its read buffer is 64 KiB.
  return swarm->Run();
}

}  // namespace bench
}  // namespace omnistage
