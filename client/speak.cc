#include "client/speak.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "client/duplex_call.h"
#include "client/generate_output.h"

namespace omnistage {
namespace {

using Clock = std::chrono::steady_clock;

// When each piece of input left, and when the first audio after it came.
class LatencyLog {
 public:
  void Sent() {
    absl::MutexLock lock(&mu_);
    sent_.push_back(Clock::now());
    first_audio_.emplace_back();
  }
  // The first audio after a line is the first after it, also when a later
  // line left before it came (a slow pipeline): every line still waiting
  // gets it.
  void Audio() {
    absl::MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    for (size_t i = first_audio_.size(); i-- > 0 && first_audio_[i] == Clock::time_point();) {
      first_audio_[i] = now;
    }
  }
  void Print() const {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < sent_.size(); ++i) {
      if (first_audio_[i] == Clock::time_point()) {
        std::fprintf(stderr, "omni: line %zu: no audio came after it\n", i + 1);
        continue;
      }
      const double ms =
          std::chrono::duration<double, std::milli>(first_audio_[i] - sent_[i]).count();
      std::fprintf(stderr, "omni: line %zu: first audio %.1f ms after its last character\n", i + 1,
                   ms);
    }
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Clock::time_point> sent_ ABSL_GUARDED_BY(mu_);
  std::vector<Clock::time_point> first_audio_ ABSL_GUARDED_BY(mu_);
};

// Reads `fd` and sends it, line by line or word by word, until its end or
// `stop`.
void Feed(int fd, bool by_word, LatencyLog& latency, const SendInput& send,
          const std::atomic<bool>& stop) {
  std::string piece;
  const auto flush = [&] {
    v1::GenerateInput message;
    message.mutable_input()->add_payloads()->mutable_text()->set_text(piece);
    piece.clear();
    return send(message);
  };
  char buffer[4096];
  while (!stop.load()) {
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, /*timeout_ms=*/50) == 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // End of input (or an unreadable one: the same).
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buffer[i];
      piece += c;
      if (c != '\n' && !(by_word && (c == ' ' || c == '\t'))) continue;
      if (!flush()) return;
      if (c == '\n') latency.Sent();
    }
  }
  if (!stop.load() && !piece.empty()) flush();
}

}  // namespace

int Speak(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
          v1::GenerateRequest request, const SpeakOptions& options, int input_fd,
          const std::atomic<bool>& interrupted) {
  LatencyLog latency;
  GenerateOutput output;
  const grpc::Status status = RunDuplex(
      stub, context, std::move(request),
      [&](const SendInput& send, const std::atomic<bool>& stop) {
        Feed(input_fd, options.by_word, latency, send, stop);
      },
      [&](const v1::GenerateResponse& response) {
        for (const v1::OutputChunk& chunk : response.outputs()) {
          if (chunk.payload().has_audio()) latency.Audio();
        }
        output.Add(response);
      },
      interrupted);
  if (options.latency) latency.Print();
  return output.End(status, "speak", options.wav, interrupted.load());
}

}  // namespace omnistage
