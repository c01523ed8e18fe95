// The figures of /v1/audio/speech (docs/openai.md, "Speech"):
//
// - encode: the CPU each response format costs per second of speech (espeak-ng's,
//   resampled to the vocoder's 24 kHz and encoded in its 500 ms chunks), against
//   wav (a copy) measured in the same run, and the bitrate it makes;
// - first audio: an orchestrator of pipelines/local_tts.yaml and a gateway in
//   front of it; C clients (--concurrency) each send --requests speech requests
//   back to back; per format and C, the time from sending a request to its
//   first audio byte (p50, p90) and to its end (p50).
//
// Each figure is the min..max over --runs runs.
//
//   bazel run -c opt //tests/bench:speech_benchmark -- --runs=3
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/testing/child_process.h"
#include "gateway/audio/audio_encoder.h"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/speech/pcm.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/figures.h"
#include "tests/bench/gateway_load.h"

ABSL_FLAG(int, runs, 3, "runs of every measurement");
ABSL_FLAG(std::string, formats, "mp3,opus,flac,wav,pcm", "response formats measured");
ABSL_FLAG(std::string, concurrency, "1,8,32", "clients at once, per first-audio cell");
ABSL_FLAG(int, requests, 4, "requests each client sends back to back, per cell");
ABSL_FLAG(int, encode_seconds, 30, "seconds of speech each encode measurement encodes");
ABSL_FLAG(std::string, scenarios, "encode,first_audio", "parts to run");

namespace omnistage {
namespace bench {
namespace {

constexpr int kRate = 24000;
constexpr char kText[] =
    "The quick brown fox jumps over the lazy dog. A pipeline speaks as it reads, clause by "
    "clause, and the listener hears the first words before the last are made.";

// ---- encode --------------------------------------------------------------------

void Encode(const std::vector<std::string>& formats, int runs) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  if (!espeak.ok()) {
    std::cerr << "encode: " << espeak.status() << "\n";
    return;
  }
  absl::StatusOr<std::vector<int16_t>> spoken = (*espeak)->Speak(kText);
  if (!spoken.ok()) {
    std::cerr << "encode: " << spoken.status() << "\n";
    return;
  }
  const std::vector<int16_t> once = Resample(*spoken, (*espeak)->sample_rate_hz(), kRate);
  std::vector<int16_t> speech;
  while (speech.size() < static_cast<size_t>(absl::GetFlag(FLAGS_encode_seconds)) * kRate) {
    speech.insert(speech.end(), once.begin(), once.end());
  }
  const double seconds = static_cast<double>(speech.size()) / kRate;
  std::map<std::string, std::vector<double>> cpu_us, ratio, kbps;
  for (int run = 0; run < runs; ++run) {
    std::map<std::string, double> this_run;
    for (const std::string& format : formats) {
      absl::StatusOr<std::unique_ptr<AudioEncoder>> encoder = MakeAudioEncoder(format, kRate);
      if (!encoder.ok()) {
        std::cerr << format << ": " << encoder.status() << "\n";
        continue;
      }
      std::string out;
      const double start = ThreadCpuSeconds();
      for (size_t at = 0; at < speech.size(); at += kRate / 2) {
        const size_t n = std::min<size_t>(kRate / 2, speech.size() - at);
        (*encoder)->Encode(absl::MakeConstSpan(speech.data() + at, n), &out).IgnoreError();
      }
      (*encoder)->Finish(&out).IgnoreError();
      const double us = (ThreadCpuSeconds() - start) * 1e6 / seconds;
      this_run[format] = us;
      cpu_us[format].push_back(us);
      kbps[format].push_back(out.size() * 8 / seconds / 1000);
    }
    for (const auto& [format, us] : this_run) {
      if (this_run.count("wav") > 0 && this_run["wav"] > 0)
        ratio[format].push_back(us / this_run["wav"]);
    }
  }
  std::cout << "\n## Encoding, " << absl::StrFormat("%.1f", seconds) << " s of speech at 24 kHz, "
            << runs << " run(s)\n\n"
            << "| format | CPU per s of audio (us) | x wav | kbit/s |\n| --- | --- | --- | --- |\n";
  for (const std::string& format : formats) {
    std::cout << "| " << format << " | " << Range(cpu_us[format], 0) << " | "
              << Range(ratio[format], 1) << " | " << Range(kbps[format], 0) << " |\n";
  }
}

// ---- first audio ---------------------------------------------------------------

struct Timing {
  bool ok = false;
  double first_ms = 0;
  double total_ms = 0;
};

// One POST /v1/audio/speech on a connection of its own (Connection: close):
// the time to the response's headers (sent with the first audio) and to its end.
Timing Speak(int port, const std::string& format) {
  Timing timing;
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return timing;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::string body = absl::StrCat(R"({"model": "tts-1", "voice": "alloy", "input": ")", kText,
                                        R"(", "response_format": ")", format, R"("})");
  const std::string request = absl::StrCat(
      "POST /v1/audio/speech HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n",
      "Content-Type: application/json\r\nContent-Length: ", body.size(), "\r\n\r\n", body);
  const absl::Time start = absl::Now();
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return timing;
  }
  std::string got;
  char buffer[1 << 16];
  bool headers = false;
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) {
    got.append(buffer, static_cast<size_t>(n));
    if (!headers && got.find("\r\n\r\n") != std::string::npos) {
      headers = true;
      timing.first_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    }
  }
  timing.total_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  close(fd);
  timing.ok = headers && got.rfind("HTTP/1.1 200", 0) == 0;
  return timing;
}

struct Stack {
  Server orchestrator;
  Server gateway;
  ~Stack() {
    StopServer(gateway);
    StopServer(orchestrator);
  }
};

absl::StatusOr<std::unique_ptr<Stack>> StartStack(const Binaries& binaries,
                                                  const std::string& gateway_binary) {
  auto stack = std::make_unique<Stack>();
  absl::StatusOr<std::unique_ptr<ChildProcess>> orchestrator = ChildProcess::Start(
      {binaries.orchestrator, "--config=pipelines/local_tts.yaml", "--listen=127.0.0.1:0",
       "--stage_worker=" + binaries.stage_worker, "--log_level=warning"});
  if (!orchestrator.ok()) return orchestrator.status();
  absl::StatusOr<std::string> line =
      (*orchestrator)->WaitForLine("listening port=", absl::Seconds(60));
  if (!line.ok()) return line.status();
  stack->orchestrator.port = ListeningLineIn(*line).port;
  stack->orchestrator.process = std::move(*orchestrator);
  absl::StatusOr<std::unique_ptr<ChildProcess>> gateway = ChildProcess::Start(
      {gateway_binary, absl::StrCat("--orchestrator=127.0.0.1:", stack->orchestrator.port),
       absl::StrCat("--speech_orchestrator=127.0.0.1:", stack->orchestrator.port),
       "--listen=127.0.0.1:0", "--log_level=warning", "--max_connections_per_address=0"});
  if (!gateway.ok()) return gateway.status();
  line = (*gateway)->WaitForLine("listening port=", absl::Seconds(10));
  if (!line.ok()) return line.status();
  stack->gateway.port = ListeningLineIn(*line).port;
  stack->gateway.process = std::move(*gateway);
  // The gateway dials the orchestrator at its first request.
  for (int i = 0; i < 50 && !Speak(stack->gateway.port, "pcm").ok; ++i) {
    absl::SleepFor(absl::Milliseconds(200));
  }
  return stack;
}

void FirstAudio(const Binaries& binaries, const std::string& gateway_binary,
                const std::vector<std::string>& formats, const std::vector<int>& concurrency,
                int runs) {
  // (format, clients) -> per run: p50 and p90 first audio, p50 end.
  std::map<std::pair<std::string, int>, std::vector<double>> p50, p90, end;
  int failed = 0;
  for (int run = 0; run < runs; ++run) {
    absl::StatusOr<std::unique_ptr<Stack>> stack = StartStack(binaries, gateway_binary);
    if (!stack.ok()) {
      std::cerr << "first audio: " << stack.status() << "\n";
      return;
    }
    for (const std::string& format : formats) {
      for (int clients : concurrency) {
        std::vector<std::vector<Timing>> timings(static_cast<size_t>(clients));
        std::vector<std::thread> threads;
        for (int c = 0; c < clients; ++c) {
          threads.emplace_back([&, c] {
            for (int r = 0; r < absl::GetFlag(FLAGS_requests); ++r) {
              timings[static_cast<size_t>(c)].push_back(Speak((*stack)->gateway.port, format));
            }
          });
        }
        for (std::thread& t : threads) t.join();
        std::vector<double> first, total;
        for (const auto& client : timings) {
          for (const Timing& t : client) {
            if (!t.ok) {
              ++failed;
              continue;
            }
            first.push_back(t.first_ms);
            total.push_back(t.total_ms);
          }
        }
        p50[{format, clients}].push_back(PercentileOf(first, 0.5));
        p90[{format, clients}].push_back(PercentileOf(first, 0.9));
        end[{format, clients}].push_back(PercentileOf(total, 0.5));
      }
    }
  }
  std::cout << "\n## First audio, " << absl::GetFlag(FLAGS_requests)
            << " requests per client back to back, " << runs << " run(s)"
            << (failed > 0 ? absl::StrCat(", ", failed, " request(s) FAILED") : "") << "\n\n"
            << "| format | clients | first audio p50 (ms) | p90 | whole response p50 (ms) |\n"
            << "| --- | --- | --- | --- | --- |\n";
  for (const std::string& format : formats) {
    for (int clients : concurrency) {
      const auto key = std::make_pair(format, clients);
      std::cout << "| " << format << " | " << clients << " | " << Range(p50[key], 1) << " | "
                << Range(p90[key], 1) << " | " << Range(end[key], 1) << " |\n";
    }
  }
}

int Run(const std::string& /*dir*/, const char* argv0) {
  const std::vector<std::string> formats =
      absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipEmpty());
  std::vector<int> concurrency;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_concurrency), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(c, &n) && n > 0) concurrency.push_back(n);
  }
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  const std::string scenarios = absl::GetFlag(FLAGS_scenarios);
  if (scenarios.find("encode") != std::string::npos) Encode(formats, runs);
  if (scenarios.find("first_audio") != std::string::npos) {
    absl::StatusOr<Binaries> binaries = FindBinaries(argv0);
    if (!binaries.ok()) {
      std::cerr << binaries.status() << "\n";
      return 1;
    }
    absl::StatusOr<std::string> gateway = FindGateway(argv0, *binaries);
    if (!gateway.ok()) {
      std::cerr << gateway.status() << "\n";
      return 1;
    }
    FirstAudio(*binaries, *gateway, formats, concurrency, runs);
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  const char* argv0 = argv[0];
  return omnistage::bench::RunInScratchDir(
      argc, argv, [argv0](const std::string& dir) { return omnistage::bench::Run(dir, argv0); });
}
