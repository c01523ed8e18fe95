#include "client/speak.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
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
  void Audio() {
    absl::MutexLock lock(&mu_);
    if (!sent_.empty() && first_audio_.back() == Clock::time_point()) {
      first_audio_.back() = Clock::now();
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

// Sends `text` as one input message; false once the call took no more.
bool SendText(grpc::ClientReaderWriter<v1::GenerateInput, v1::GenerateResponse>& stream,
              const std::string& text) {
  v1::GenerateInput message;
  message.mutable_input()->add_payloads()->mutable_text()->set_text(text);
  return stream.Write(message);
}

// Reads `fd` and sends it, line by line or word by word, then half-closes.
// Returns early once `done` (the call ended: nothing more can go).
void Feed(grpc::ClientReaderWriter<v1::GenerateInput, v1::GenerateResponse>& stream, int fd,
          bool by_word, LatencyLog& latency, const std::atomic<bool>& done) {
  std::string piece;
  char buffer[4096];
  while (!done.load()) {
    pollfd readable{fd, POLLIN, 0};
    if (poll(&readable, 1, /*timeout_ms=*/50) == 0) continue;
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // End of input (or an unreadable one: the same).
    for (ssize_t i = 0; i < n; ++i) {
      const char c = buffer[i];
      piece += c;
      const bool end = c == '\n' || (by_word && (c == ' ' || c == '\t'));
      if (!end) continue;
      if (!SendText(stream, piece)) return;
      if (c == '\n') latency.Sent();
      piece.clear();
    }
  }
  if (done.load()) return;
  if (!piece.empty() && !SendText(stream, piece)) return;
  stream.WritesDone();
}

}  // namespace

int Speak(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
          v1::GenerateRequest request, const SpeakOptions& options, int input_fd,
          const std::atomic<bool>& interrupted) {
  std::unique_ptr<grpc::ClientReaderWriter<v1::GenerateInput, v1::GenerateResponse>> stream =
      stub.GenerateDuplex(context);
  v1::GenerateInput first;
  *first.mutable_request() = std::move(request);
  LatencyLog latency;
  std::atomic<bool> streaming{true};
  // Set when the responses end: the feeder stops.
  std::atomic<bool> done{false};
  std::thread feeder;
  // A refused first message shows in the call's status below.
  if (stream->Write(first)) {
    feeder = std::thread([&] { Feed(*stream, input_fd, options.by_word, latency, done); });
  }
  std::thread watcher([&] {
    while (streaming.load() && !interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (interrupted.load()) context->TryCancel();
  });
  GenerateOutput output;
  v1::GenerateResponse response;
  while (stream->Read(&response)) {
    for (const v1::OutputChunk& chunk : response.outputs()) {
      if (chunk.payload().has_audio()) latency.Audio();
    }
    output.Add(response);
  }
  // The responses ended: the feeder stops reading (within its poll interval)
  // before the call is finished under it.
  done = true;
  if (feeder.joinable()) feeder.join();
  streaming = false;
  const grpc::Status status = stream->Finish();
  watcher.join();
  if (options.latency) latency.Print();
  return output.End(status, "speak", options.wav, interrupted.load());
}

}  // namespace omnistage
