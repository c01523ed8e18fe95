// The figures of /v1/audio/transcriptions (docs/openai.md, "Transcriptions"):
//
// - decode: the gateway's CPU per second of audio to decode an upload
//   (DecodeAudioFile, libsndfile) and resample it to the recogniser's 16 kHz
//   (libsoxr, as ResampleMono does), per upload format (--formats: wav 44.1 kHz
//   stereo, flac 48 kHz, ogg/opus 48 kHz, mp3 22.05 kHz, made by Debian's
//   ffmpeg from the clip below), against wav measured in the same run;
// - real-time factor: an orchestrator of pipelines/local_listener.yaml (told
//   the test speaker's channel mean, as gateway/transcription_test.sh does) and
//   a gateway in front of it; C clients (--concurrency) each upload the clip
//   (--upload_format) --requests times back to back, response_format json; per
//   C, the wall time of an upload over its audio's seconds (p50, p90), the
//   audio seconds transcribed per wall second, and the CPU the gateway and the
//   listener's worker spent per second of audio; then the word error rate of
//   the transcript against the sentences spoken (once: the listener hears the
//   same upload the same every time; the uploads whose transcript differs are
//   counted).
//
// The clip: the listener's 8 test sentences (stage_worker/engines/models/
// listener_test.cc) spoken by espeak-ng as the test speaker
// (stage_worker/engines/testing/test_speaker.h), --pause_ms of silence between
// them: about 30 s.
//
// Each figure is the min..max over --runs runs.
//
//   bazel run -c opt //tests/bench:transcription_benchmark -- --runs=3
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/testing/child_process.h"
#include "gateway/audio/audio_decoder.h"
#include "gateway/audio/audio_resampler.h"
#include "httplib.h"
#include "nlohmann/json.hpp"
#include "stage_worker/engines/speech/espeak.h"
#include "stage_worker/engines/testing/test_speaker.h"
#include "stage_worker/engines/testing/word_error_rate.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/figures.h"
#include "tests/bench/gateway_load.h"

ABSL_FLAG(int, runs, 3, "runs of every measurement");
ABSL_FLAG(std::string, formats, "wav,flac,opus,mp3",
          "upload formats decoded (wav 44.1 kHz stereo, flac 48 kHz, opus: ogg 48 kHz, mp3 "
          "22.05 kHz, vorbis: ogg 22.05 kHz stereo)");
ABSL_FLAG(std::string, concurrency, "1,2,4", "clients at once, per real-time-factor cell");
ABSL_FLAG(int, requests, 3, "uploads each client sends back to back, per cell");
ABSL_FLAG(int, decode_passes, 5, "times each format is decoded per run (the CPU summed)");
ABSL_FLAG(std::string, upload_format, "wav", "the format the real-time-factor clients upload");
ABSL_FLAG(int, pause_ms, 1750, "silence between the clip's sentences");
ABSL_FLAG(std::string, scenarios, "decode,rtf", "parts to run");

namespace omnistage {
namespace bench {
namespace {

constexpr int kRecogniserHz = 16000;  // The gateway's --transcription_sample_rate_hz default.
constexpr double kMaxSeconds = 1500;  // Its --transcription_max_seconds default.
constexpr char kFfmpeg[] = "/usr/bin/ffmpeg";
constexpr char kBoundary[] = "----omnistage-transcription-benchmark-7d41c0a9e2";

// An upload format: its name, the file's extension and MIME type, ffmpeg's
// output flags, and what the table says of it.
struct Format {
  const char* name;
  const char* extension;
  const char* mime;
  std::vector<std::string> ffmpeg_flags;
  const char* description;
};

const std::vector<Format>& Formats() {
  static const auto* formats = new std::vector<Format>{
      {"wav", "wav", "audio/wav", {"-ar", "44100", "-ac", "2"}, "wav, 44.1 kHz stereo"},
      {"flac", "flac", "audio/flac", {"-ar", "48000"}, "flac, 48 kHz"},
      {"opus", "ogg", "audio/ogg", {"-c:a", "libopus", "-ar", "48000"}, "ogg/opus, 48 kHz"},
      {"mp3", "mp3", "audio/mpeg", {"-c:a", "libmp3lame", "-ar", "22050"}, "mp3, 22.05 kHz"},
      {"vorbis",
       "ogg",
       "audio/ogg",
       {"-c:a", "libvorbis", "-ar", "22050", "-ac", "2"},
       "ogg/vorbis, 22.05 kHz stereo"},
  };
  return *formats;
}

const Format* FindFormat(const std::string& name) {
  for (const Format& format : Formats()) {
    if (name == format.name) return &format;
  }
  return nullptr;
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// ---- the clip ------------------------------------------------------------------

struct Clip {
  std::vector<int16_t> samples;  // Mono, at rate_hz.
  int rate_hz = 0;
  std::string reference;  // The sentences spoken, in order.
  double seconds() const { return static_cast<double>(samples.size()) / rate_hz; }
};

// The test sentences spoken as the listener's test speaker, `pause_ms` of
// silence between them and 300 ms on either side (as speak_pcm leaves).
absl::StatusOr<Clip> SpeakClip(int pause_ms) {
  absl::StatusOr<Espeak*> espeak = Espeak::Get();
  if (!espeak.ok()) return espeak.status();
  Clip clip;
  clip.rate_hz = (*espeak)->sample_rate_hz();
  const size_t edge = static_cast<size_t>(clip.rate_hz * 3 / 10);
  const size_t pause = static_cast<size_t>(static_cast<int64_t>(clip.rate_hz) * pause_ms / 1000);
  clip.samples.resize(edge);
  std::vector<std::string> spoken;
  for (const char* sentence : kTestSentences) {
    absl::StatusOr<std::vector<int16_t>> speech =
        (*espeak)->Speak(sentence, kTestSpeakerVariant, kTestSpeakerVoice);
    if (!speech.ok()) return speech.status();
    if (!spoken.empty()) clip.samples.resize(clip.samples.size() + pause);
    clip.samples.insert(clip.samples.end(), speech->begin(), speech->end());
    spoken.push_back(sentence);
  }
  clip.samples.resize(clip.samples.size() + edge);
  clip.reference = absl::StrJoin(spoken, " ");
  return clip;
}

// The clip as `format`'s file, encoded by ffmpeg from raw PCM in `dir`.
absl::StatusOr<std::string> EncodeClip(const Clip& clip, const Format& format,
                                       const std::string& dir) {
  const std::string pcm_path = absl::StrCat(dir, "/clip.pcm");
  {
    std::string bytes;
    bytes.reserve(clip.samples.size() * 2);
    for (int16_t s : clip.samples) {  // Little-endian, whatever the host.
      bytes.push_back(static_cast<char>(static_cast<uint16_t>(s) & 0xff));
      bytes.push_back(static_cast<char>(static_cast<uint16_t>(s) >> 8));
    }
    if (absl::Status written = WriteFile(pcm_path, bytes); !written.ok()) return written;
  }
  const std::string out = absl::StrCat(dir, "/clip-", format.name, ".", format.extension);
  std::vector<std::string> argv = {kFfmpeg, "-v", "error", "-y", "-f", "s16le"};
  argv.insert(argv.end(), {"-ar", absl::StrCat(clip.rate_hz), "-ac", "1", "-i", pcm_path});
  argv.insert(argv.end(), format.ffmpeg_flags.begin(), format.ffmpeg_flags.end());
  argv.push_back(out);
  absl::StatusOr<std::unique_ptr<ChildProcess>> ffmpeg = ChildProcess::Start(argv);
  if (!ffmpeg.ok()) return ffmpeg.status();
  const std::optional<int> code = (*ffmpeg)->Wait(absl::Seconds(120));
  if (code != 0) {
    return absl::InternalError(absl::StrCat("ffmpeg ", format.name, " exited ",
                                            code.has_value() ? absl::StrCat(*code) : "late"));
  }
  std::string bytes = ReadWholeFile(out);
  if (bytes.empty()) return absl::InternalError(absl::StrCat("ffmpeg made no ", out));
  return bytes;
}

// ---- decode --------------------------------------------------------------------

// The gateway's resampling (ResampleMono); a failure is printed, its samples none.
std::vector<int16_t> Resample(absl::Span<const int16_t> samples, int from_hz, int to_hz) {
  absl::StatusOr<std::vector<int16_t>> out = ResampleMono(samples, from_hz, to_hz);
  if (!out.ok()) std::cerr << out.status() << "\n";
  return out.ok() ? *std::move(out) : std::vector<int16_t>();
}

void Decode(const Clip& clip, const std::vector<const Format*>& formats, const std::string& dir,
            int runs) {
  std::map<std::string, std::string> files;
  for (const Format* format : formats) {
    absl::StatusOr<std::string> bytes = EncodeClip(clip, *format, dir);
    if (!bytes.ok()) {
      std::cerr << "decode: " << bytes.status() << "\n";
      continue;
    }
    files[format->name] = *std::move(bytes);
  }
  const int passes = std::max(1, absl::GetFlag(FLAGS_decode_passes));
  // format -> per run: ms of CPU per second of audio.
  std::map<std::string, std::vector<double>> decode_ms, resample_ms, total_ms, ratio;
  std::map<std::string, double> seconds;
  for (int run = 0; run < runs; ++run) {
    std::map<std::string, double> this_run;
    for (const Format* format : formats) {
      if (files.count(format->name) == 0) continue;
      double decode_cpu = 0, resample_cpu = 0, audio_seconds = 0;
      for (int pass = 0; pass < passes; ++pass) {
        const double start = ThreadCpuSeconds();
        absl::StatusOr<DecodedAudio> decoded = DecodeAudioFile(files[format->name], kMaxSeconds);
        const double decoded_at = ThreadCpuSeconds();
        if (!decoded.ok()) {
          std::cerr << format->name << ": " << decoded.status() << "\n";
          break;
        }
        const std::vector<int16_t> at_16k =
            Resample(decoded->mono, decoded->sample_rate_hz, kRecogniserHz);
        const double end = ThreadCpuSeconds();
        if (at_16k.empty()) break;
        decode_cpu += decoded_at - start;
        resample_cpu += end - decoded_at;
        audio_seconds += decoded->seconds();
      }
      if (audio_seconds <= 0) continue;
      seconds[format->name] = audio_seconds / passes;
      decode_ms[format->name].push_back(decode_cpu * 1e3 / audio_seconds);
      resample_ms[format->name].push_back(resample_cpu * 1e3 / audio_seconds);
      const double total = (decode_cpu + resample_cpu) * 1e3 / audio_seconds;
      total_ms[format->name].push_back(total);
      this_run[format->name] = total;
    }
    for (const auto& [format, ms] : this_run) {
      if (this_run.count("wav") > 0 && this_run["wav"] > 0)
        ratio[format].push_back(ms / this_run["wav"]);
    }
  }
  std::cout << "\n## Decoding and resampling to 16 kHz, " << absl::StrFormat("%.1f", clip.seconds())
            << " s of speech, " << passes << " pass(es) per run, " << runs << " run(s)\n\n"
            << "| format | file (KiB) | decoded (s) | decode CPU per s of audio (ms) | resample "
               "(ms) | total (ms) | x wav |\n"
            << "| --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Format* format : formats) {
    const std::string name = format->name;
    std::cout << "| " << format->description << " | "
              << (files.count(name) > 0 ? absl::StrCat(files[name].size() / 1024) : "-") << " | "
              << (seconds.count(name) > 0 ? absl::StrFormat("%.2f", seconds[name]) : "-") << " | "
              << Range(decode_ms[name], 3) << " | " << Range(resample_ms[name], 3) << " | "
              << Range(total_ms[name], 3) << " | " << Range(ratio[name], 1) << " |\n";
  }
}

// ---- real-time factor ----------------------------------------------------------

// A multipart/form-data body as a client builds it: the file, the model, json.
std::string MultipartBody(const std::string& file, const Format& format) {
  const std::string next = absl::StrCat("\r\n--", kBoundary, "\r\n");
  return absl::StrCat("--", kBoundary, "\r\n",
                      "Content-Disposition: form-data; name=\"file\"; filename=\"clip.",
                      format.extension, "\"\r\nContent-Type: ", format.mime, "\r\n\r\n", file, next,
                      "Content-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1", next,
                      "Content-Disposition: form-data; name=\"response_format\"\r\n\r\njson",
                      "\r\n--", kBoundary, "--\r\n");
}

struct Upload {
  bool ok = false;
  double wall_s = 0;
  std::string text;   // The transcript.
  std::string error;  // When not ok: what came back.
};

// A client: one keep-alive connection, uploads one at a time.
class Uploader {
 public:
  explicit Uploader(int port) : client_("127.0.0.1", port) {
    client_.set_keep_alive(true);
    client_.set_tcp_nodelay(true);
    client_.set_read_timeout(600);
    client_.set_write_timeout(60);
  }

  Upload Send(const std::string& body) {
    Upload upload;
    const absl::Time start = absl::Now();
    const httplib::Result response =
        client_.Post("/v1/audio/transcriptions", body,
                     absl::StrCat("multipart/form-data; boundary=", kBoundary));
    upload.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
    if (!response) {
      upload.error = absl::StrCat("HTTP: ", httplib::to_string(response.error()));
      return upload;
    }
    if (response->status != 200) {
      upload.error = absl::StrCat("HTTP ", response->status, ": ", response->body.substr(0, 300));
      return upload;
    }
    const nlohmann::json json = nlohmann::json::parse(response->body, nullptr, false);
    if (json.is_discarded() || !json.is_object() || !json.contains("text") ||
        !json["text"].is_string()) {
      upload.error = absl::StrCat("not a transcription: ", response->body.substr(0, 300));
      return upload;
    }
    upload.text = json["text"].get<std::string>();
    upload.ok = true;
    return upload;
  }

 private:
  httplib::Client client_;
};

struct Stack {
  Server orchestrator;
  Server gateway;
  ~Stack() {
    StopServer(gateway);
    StopServer(orchestrator);
  }
};

// The listener's config with the test speaker's channel mean (as
// with_test_speaker in orchestrator/testing/orchestrator_process.sh writes it).
absl::StatusOr<std::string> ListenerConfig(const std::string& dir) {
  const std::string yaml = ReadWholeFile("pipelines/local_listener.yaml");
  constexpr char kParams[] = "engine_params: {batch_size: 4}";
  if (yaml.find(kParams) == std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat("pipelines/local_listener.yaml has no '",
                                                      kParams,
                                                      "' (is it in the runfiles? did it change?)"));
  }
  const std::string path = absl::StrCat(dir, "/listener.yaml");
  absl::Status written = WriteFile(
      path, absl::StrReplaceAll(
                yaml, {{kParams, absl::StrCat("engine_params: {batch_size: 4, cmn_init: \"",
                                              kTestSpeakerChannelMean, "\"}")}}));
  if (!written.ok()) return written;
  return path;
}

// Started from the main thread (PR_SET_PDEATHSIG follows the starting thread);
// returns once `warm_up` (a short upload) came back transcribed.
absl::StatusOr<std::unique_ptr<Stack>> StartStack(const Binaries& binaries,
                                                  const std::string& gateway_binary,
                                                  const std::string& config,
                                                  const std::string& warm_up) {
  auto stack = std::make_unique<Stack>();
  absl::StatusOr<std::unique_ptr<ChildProcess>> orchestrator =
      ChildProcess::Start({binaries.orchestrator, "--config=" + config, "--listen=127.0.0.1:0",
                           "--stage_worker=" + binaries.stage_worker, "--log_level=warning"});
  if (!orchestrator.ok()) return orchestrator.status();
  absl::StatusOr<std::string> line =
      (*orchestrator)->WaitForLine("listening port=", absl::Seconds(60));
  if (!line.ok()) return line.status();
  stack->orchestrator.port = ListeningLineIn(*line).port;
  stack->orchestrator.process = std::move(*orchestrator);
  const std::string target = absl::StrCat("127.0.0.1:", stack->orchestrator.port);
  absl::StatusOr<std::unique_ptr<ChildProcess>> gateway = ChildProcess::Start(
      {gateway_binary, "--orchestrator=" + target, "--transcription_orchestrator=" + target,
       "--listen=127.0.0.1:0", "--log_level=warning", "--max_connections_per_address=0"});
  if (!gateway.ok()) return gateway.status();
  line = (*gateway)->WaitForLine("listening port=", absl::Seconds(10));
  if (!line.ok()) return line.status();
  stack->gateway.port = ListeningLineIn(*line).port;
  stack->gateway.process = std::move(*gateway);
  // The listener's decoders take seconds to make; the gateway dials at its
  // first request.
  Upload upload;
  for (int i = 0; i < 60; ++i) {
    upload = Uploader(stack->gateway.port).Send(warm_up);
    if (upload.ok) return stack;
    absl::SleepFor(absl::Milliseconds(500));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the warm-up upload was not transcribed in 30 s: ", upload.error));
}

// CPU (sched_ns) of `pid` and of its children (the orchestrator's workers).
int64_t CpuNs(pid_t pid) {
  absl::StatusOr<ProcessCpu> cpu = ReadProcessCpu(pid);
  return cpu.ok() ? cpu->sched_ns : 0;
}
int64_t ChildrenCpuNs(pid_t pid) {
  int64_t ns = 0;
  for (pid_t child : ChildPids(pid)) ns += CpuNs(child);
  return ns;
}

void RealTimeFactor(const Binaries& binaries, const std::string& gateway_binary, const Clip& clip,
                    const Format& format, const std::vector<int>& concurrency,
                    const std::string& dir, int runs) {
  absl::StatusOr<std::string> file = EncodeClip(clip, format, dir);
  absl::StatusOr<std::string> config = ListenerConfig(dir);
  Clip first = clip;  // The first sentence alone: the warm-up.
  first.samples.resize(std::min(clip.samples.size(), static_cast<size_t>(clip.rate_hz * 3)));
  absl::StatusOr<std::string> warm_up_file = EncodeClip(first, format, dir);
  for (const absl::Status& status : {file.status(), config.status(), warm_up_file.status()}) {
    if (!status.ok()) {
      std::cerr << "real-time factor: " << status << "\n";
      return;
    }
  }
  if (file->find(kBoundary) != std::string::npos) {
    std::cerr << "real-time factor: the upload holds the multipart boundary\n";
    return;
  }
  const std::string body = MultipartBody(*file, format);
  const std::string warm_up = MultipartBody(*warm_up_file, format);
  const double audio_s = clip.seconds();
  const int requests = std::max(1, absl::GetFlag(FLAGS_requests));
  // clients -> per run: p50, p90 of wall / audio; audio s per wall s; CPU per audio s.
  std::map<int, std::vector<double>> p50, p90, throughput, gateway_ms, listener_s;
  std::map<std::string, int> transcripts;  // Transcript -> uploads that heard it.
  int failed = 0;
  std::string first_error;
  const absl::Time began = absl::Now();
  for (int run = 0; run < runs; ++run) {
    absl::StatusOr<std::unique_ptr<Stack>> stack =
        StartStack(binaries, gateway_binary, *config, warm_up);
    if (!stack.ok()) {
      std::cerr << "real-time factor: " << stack.status() << "\n";
      return;
    }
    const pid_t gateway_pid = (*stack)->gateway.pid();
    const pid_t orchestrator_pid = (*stack)->orchestrator.pid();
    for (int clients : concurrency) {
      std::vector<std::vector<Upload>> uploads(static_cast<size_t>(clients));
      std::vector<std::unique_ptr<Uploader>> uploaders;
      for (int c = 0; c < clients; ++c) {
        uploaders.push_back(std::make_unique<Uploader>((*stack)->gateway.port));
      }
      const int64_t gateway_before = CpuNs(gateway_pid);
      const int64_t listener_before = ChildrenCpuNs(orchestrator_pid);
      const absl::Time start = absl::Now();
      std::vector<std::thread> threads;
      for (int c = 0; c < clients; ++c) {
        threads.emplace_back([&, c] {
          for (int r = 0; r < requests; ++r) {
            uploads[static_cast<size_t>(c)].push_back(
                uploaders[static_cast<size_t>(c)]->Send(body));
          }
        });
      }
      for (std::thread& t : threads) t.join();
      const double wall_s = absl::ToDoubleSeconds(absl::Now() - start);
      const double gateway_cpu_s = (CpuNs(gateway_pid) - gateway_before) / 1e9;
      const double listener_cpu_s = (ChildrenCpuNs(orchestrator_pid) - listener_before) / 1e9;
      std::vector<double> factors;
      for (const auto& client : uploads) {
        for (const Upload& upload : client) {
          if (!upload.ok) {
            if (failed++ == 0) first_error = upload.error;
            continue;
          }
          factors.push_back(upload.wall_s / audio_s);
          ++transcripts[upload.text];
        }
      }
      if (factors.empty()) continue;
      const double heard_s = audio_s * static_cast<double>(factors.size());
      p50[clients].push_back(PercentileOf(factors, 0.5));
      p90[clients].push_back(PercentileOf(factors, 0.9));
      throughput[clients].push_back(heard_s / wall_s);
      gateway_ms[clients].push_back(gateway_cpu_s * 1e3 / heard_s);
      listener_s[clients].push_back(listener_cpu_s / heard_s);
    }
  }
  std::cout << "\n## Real-time factor, " << absl::StrFormat("%.1f", audio_s) << " s of speech as "
            << format.description << ", " << requests << " upload(s) per client back to back, "
            << runs << " run(s) ("
            << absl::StrFormat("%.0f", absl::ToDoubleSeconds(absl::Now() - began)) << " s)"
            << (failed > 0 ? absl::StrCat(", ", failed, " upload(s) FAILED: ", first_error) : "")
            << "\n\n"
            << "| clients | wall / audio p50 | p90 | audio s per wall s | gateway CPU per audio "
               "s (ms) | listener CPU per audio s (s) |\n"
            << "| --- | --- | --- | --- | --- | --- |\n";
  for (int clients : concurrency) {
    std::cout << "| " << clients << " | " << Range(p50[clients], 3) << " | "
              << Range(p90[clients], 3) << " | " << Range(throughput[clients], 2) << " | "
              << Range(gateway_ms[clients], 2) << " | " << Range(listener_s[clients], 3) << " |\n";
  }
  if (transcripts.empty()) return;
  // The transcript most uploads heard (all of them, when the listener is
  // deterministic).
  const auto heard =
      std::max_element(transcripts.begin(), transcripts.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  int uploads = 0;
  for (const auto& [text, count] : transcripts) uploads += count;
  const WordErrors errors = CountWordErrors(clip.reference, heard->first);
  std::cout << "\nword error rate: " << errors.edits << "/" << errors.reference_words << " = "
            << absl::StrFormat("%.2f", errors.rate()) << " (" << heard->second << " of " << uploads
            << " uploads heard the same transcript"
            << (transcripts.size() > 1 ? absl::StrCat("; ", transcripts.size() - 1, " other(s)")
                                       : "")
            << ")\nheard: " << heard->first << "\n";
}

int Run(const std::string& dir, const char* argv0) {
  std::vector<const Format*> formats;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_formats), ',', absl::SkipEmpty())) {
    const Format* format = FindFormat(std::string(name));
    if (format == nullptr) {
      std::cerr << "--formats: no format " << name << "\n";
      return 1;
    }
    formats.push_back(format);
  }
  const Format* upload_format = FindFormat(absl::GetFlag(FLAGS_upload_format));
  if (upload_format == nullptr) {
    std::cerr << "--upload_format: no format " << absl::GetFlag(FLAGS_upload_format) << "\n";
    return 1;
  }
  std::vector<int> concurrency;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_concurrency), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(c, &n) && n > 0) concurrency.push_back(n);
  }
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  absl::StatusOr<Clip> clip = SpeakClip(std::max(0, absl::GetFlag(FLAGS_pause_ms)));
  if (!clip.ok()) {
    std::cerr << "the clip: " << clip.status() << "\n";
    return 1;
  }
  const std::string scenarios = absl::GetFlag(FLAGS_scenarios);
  if (scenarios.find("decode") != std::string::npos) Decode(*clip, formats, dir, runs);
  if (scenarios.find("rtf") != std::string::npos) {
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
    RealTimeFactor(*binaries, *gateway, *clip, *upload_format, concurrency, dir, runs);
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
