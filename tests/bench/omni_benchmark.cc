// Time to first audio and playback stalls of an omni pipeline under load
// (docs/benchmarks.md, "Time to first audio and stalls"): an orchestrator of a
// thinker -> talker -> vocoder pipeline whose step times resemble a real omni
// model's, and C clients (each cell of --concurrency) asking for spoken answers
// back to back for --cell_seconds. Each client plays what it gets as a
// listener would (common/playback_model.h): per cell, the time to first audio
// (p50, p99, and p99 over the same policy's at one client in the same run),
// the real-time factor (p50, p99), the share of answers that stalled, the
// stalled seconds per minute of audio, answers per second, the talker's
// saturation as the orchestrator's scaling signal reported it (the highest
// seen), the audio capacity it measured (the last seen), and the talker's own
// audio capacity with the stage that limits the audio (the last seen). Every
// policy is a row of its own, run in the same run.
//
//   bazel run -c opt //tests/bench:omni_benchmark -- --runs=3
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/modality.h"
#include "common/playback_model.h"
#include "common/testing/child_process.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"
#include "tests/bench/bench_processes.h"
#include "tests/bench/figures.h"
#include "tests/bench/run_table.h"

ABSL_FLAG(int, runs, 3, "runs of every cell; each figure is shown per run and as min..max");
ABSL_FLAG(std::string, concurrency, "1,2,4,8,16,32,64", "clients at once, one cell each");
ABSL_FLAG(double, cell_seconds, 8, "each client asks for answers back to back this long");
ABSL_FLAG(int, sentences, 2, "sentences per answer (the thinker's)");
ABSL_FLAG(int, jitter_buffer_ms, 0, "each client's player buffers this long before it plays");
ABSL_FLAG(std::string, policies, "today,deadline,admission,sentence,first_piece,later_pieces",
          "policies, a row each: today (each output streamed on as it comes), deadline (and "
          "every stage's requests ahead of their listener by --playback_lead_ms sit out steps "
          "while others are close), admission (and admission by audio capacity at 85%), "
          "sentence (a talker that speaks each sentence once it ends), first_piece (and whose "
          "first piece is --first_piece_words words or a clause), later_pieces (and a vocoder "
          "whose later pieces gather for up to --later_piece_steps steps by its load)");
ABSL_FLAG(int, playback_lead_ms, 1000, "the deadline row's playback_lead_ms, on every stage");
ABSL_FLAG(int, first_piece_words, 3,
          "the first_piece and later_pieces rows' talker first_piece_words");
ABSL_FLAG(int, later_piece_steps, 4, "the later_pieces row's vocoder later_piece_steps");
ABSL_FLAG(std::string, json, "", "also write the figures as JSON to this path");
ABSL_FLAG(int, max_seconds, 1800, "the whole run is cut (exit 3) after this long");

namespace omnistage {
namespace bench {
namespace {

// The model. A thinker writing about 40 words a second per request at batch 1
// (25 ms a step), a talker making one 40 ms codec frame per step (a 25 Hz
// codec) in 12 ms at batch 1 (real-time factor 0.3), and a vocoder turning up
// to 8 frames a step into audio in 5 ms; each step grows with the requests it
// runs (step_us_per_request), as a GPU's forward pass grows with its batch:
// the talker's 64th request makes a step 40.8 ms, past the 40 ms of audio it
// makes. Batches of 64.
//
// Policies: `today`, each output streamed on as it comes; `deadline`, the
// same with every stage's playback_lead_ms set (a request whose listener has
// that much audio in hand sits out steps while another's is closer to running
// out); `admission`, today's with admission by audio capacity
// (playback.audio_admission_percent 85). `sentence`: the talker speaks as the
// demo's does, each sentence's phonemes once the sentence ends (`codes:
// phonemes`, one code per step, at the same cost per step);
// `first_piece`: and a request's first piece is a few words or a clause;
// `later_pieces`: and the vocoder's later pieces gather codes for up to
// later_piece_steps steps, more the fuller its batch (its cost is per request
// in a step, not per code).
std::string OmniPipelineYaml(const std::string& policy) {
  const std::string playback =
      policy == "admission" ? "playback: {audio_admission_percent: 85}\n" : "";
  const std::string lead =
      policy == "deadline"
          ? absl::StrCat(", playback_lead_ms: ", absl::GetFlag(FLAGS_playback_lead_ms))
          : "";
  const std::string later =
      policy == "later_pieces"
          ? absl::StrCat(", later_piece_steps: ", absl::GetFlag(FLAGS_later_piece_steps))
          : "";
  std::string talker_codes = "codes: hashed, chars_per_step: 1, codes_per_char: 1";
  if (policy == "sentence") talker_codes = "codes: phonemes, codes_per_step: 1";
  if (policy == "first_piece" || policy == "later_pieces") {
    talker_codes = absl::StrCat("codes: phonemes, codes_per_step: 1, first_piece_words: ",
                                absl::GetFlag(FLAGS_first_piece_words));
  }
  return R"(name: omni-benchmark
keepalive_ms: 2000
keepalive_timeout_ms: 10000
)" + playback +
         R"(stages:
  - name: thinker
    engine: thinker
    engine_params: {batch_size: 64, step_time_us: 25000, step_us_per_request: 250)" +
         lead + R"(}
    replicas: 1
    output_modality: text
    final_output: true
    defaults: {max_tokens: 1000}
  - name: talker
    engine: talker
    engine_params: {)" +
         talker_codes + R"(, batch_size: 64,
                    step_time_us: 12000, step_us_per_request: 450, max_tokens: 100000)" +
         lead + R"(}
    replicas: 1
    output_modality: tokens
    input_mode: streaming
  - name: vocoder
    engine: vocoder
    engine_params: {sound: tones, ms_per_code: 40, codes_per_step: 8, batch_size: 64,
                    step_time_us: 5000, step_us_per_request: 100, max_tokens: 100000)" +
         lead + later + R"(}
    replicas: 1
    output_modality: audio
    final_output: true
    input_mode: streaming
)";
}

// What one answer was, as its client heard it.
struct Heard {
  bool ok = false;
  PlaybackFigures figures;
};

class OmniClient {
 public:
  explicit OmniClient(int port)
      : stub_(v1::Orchestrator::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                            grpc::InsecureChannelCredentials()))) {}

  // One spoken answer, played as it comes.
  Heard Ask(int n, absl::Duration jitter_buffer) {
    v1::GenerateRequest request;
    request.set_prompt(absl::StrCat("Tell me about the omni benchmark, question ", n, "."));
    request.add_output_modalities(v1::MODALITY_AUDIO);
    v1::StageParameters* thinker = request.add_stage_params();
    thinker->set_stage_id(0);
    (*thinker->mutable_extra())["sentences"] = absl::StrCat(absl::GetFlag(FLAGS_sentences));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    const absl::Time start = absl::Now();
    PlaybackModel player(jitter_buffer);
    std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
        stub_->Generate(&context, request);
    v1::GenerateResponse response;
    bool stopped = false;
    while (reader->Read(&response)) {
      const absl::Time now = absl::Now();
      for (const v1::OutputChunk& chunk : response.outputs()) {
        if (chunk.payload().has_audio())
          player.Arrived(AudioSecondsOf(chunk.payload().audio()), now);
      }
      if (response.has_terminal()) {
        stopped = response.terminal().finish_reason() == v1::FINISH_REASON_STOP;
      }
    }
    Heard heard;
    heard.ok = reader->Finish().ok() && stopped && player.heard();
    heard.figures = player.Figures(start);
    return heard;
  }

  // The orchestrator's status now (empty when the call fails).
  v1::PipelineStatus Status() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    v1::PipelineStatus status;
    if (!stub_->GetPipelineStatus(&context, v1::PipelineStatusRequest(), &status).ok()) return {};
    return status;
  }

 private:
  std::unique_ptr<v1::Orchestrator::Stub> stub_;
};

absl::StatusOr<Server> StartOmniOrchestrator(const Binaries& binaries, const std::string& dir,
                                             const std::string& policy) {
  const std::string config = absl::StrCat(dir, "/omni_", policy, ".yaml");
  if (absl::Status s = WriteFile(config, OmniPipelineYaml(policy)); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<ChildProcess>> process =
      ChildProcess::Start({binaries.orchestrator, "--config=" + config, "--listen=127.0.0.1:0",
                           "--stage_worker=" + binaries.stage_worker, "--log_level=warning"});
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> line = (*process)->WaitForLine("listening port=", absl::Seconds(60));
  if (!line.ok()) return line.status();
  Server server;
  server.port = ListeningLineIn(*line).port;
  server.process = std::move(*process);
  // The workers connect after the orchestrator listens: ready once an answer
  // comes back whole.
  OmniClient probe(server.port);
  for (int i = 0; !probe.Ask(-1, absl::ZeroDuration()).ok; ++i) {
    if (i == 100) return absl::UnavailableError("the pipeline answered nothing in 20 s");
    absl::SleepFor(absl::Milliseconds(200));
  }
  return server;
}

// One cell: `clients` clients ask back to back for `cell`; the figures, in the
// table's column order but for "p99 x c1" (filled in by the caller).
std::vector<double> RunCell(int port, int clients, absl::Duration cell,
                            absl::Duration jitter_buffer) {
  std::vector<std::vector<Heard>> heard(static_cast<size_t>(clients));
  std::atomic<int> next{0};
  const absl::Time start = absl::Now();
  const absl::Time end = start + cell;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      OmniClient client(port);
      do {
        heard[static_cast<size_t>(c)].push_back(client.Ask(next.fetch_add(1), jitter_buffer));
      } while (absl::Now() < end);
    });
  }
  double saturation = 0;
  double capacity = kNone;
  double talker_capacity = kNone;
  double limiting_stage = kNone;
  OmniClient watcher(port);
  while (absl::Now() < end) {
    const v1::PipelineStatus status = watcher.Status();
    if (status.stages_size() > 1) {
      saturation = std::max(saturation, status.stages(1).scaling().saturation());
    }
    if (status.audio().capacity_known()) capacity = status.audio().capacity_streams();
    if (status.stages_size() > 1 && status.stages(1).scaling().audio_capacity_known()) {
      talker_capacity = status.stages(1).scaling().audio_stream_capacity();
    }
    for (const v1::StageStatus& stage : status.stages()) {
      if (stage.scaling().audio_limited()) limiting_stage = stage.stage_id();
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  for (std::thread& t : threads) t.join();
  const double wall = absl::ToDoubleSeconds(absl::Now() - start);

  std::vector<double> ttfa_ms, rtf;
  double audio = 0, stalled = 0;
  int answers = 0, stalled_answers = 0, failed = 0;
  for (const std::vector<Heard>& client : heard) {
    for (const Heard& h : client) {
      if (!h.ok) {
        ++failed;
        continue;
      }
      ++answers;
      ttfa_ms.push_back(h.figures.first_audio_seconds * 1000);
      rtf.push_back(h.figures.real_time_factor);
      audio += h.figures.audio_seconds;
      stalled += h.figures.stalled_seconds;
      if (h.figures.stalls > 0) ++stalled_answers;
    }
  }
  if (answers == 0) {
    return {kNone,
            kNone,
            kNone,
            kNone,
            kNone,
            kNone,
            kNone,
            0,
            saturation,
            capacity,
            talker_capacity,
            limiting_stage,
            static_cast<double>(failed)};
  }
  return {PercentileOf(ttfa_ms, 0.5),
          PercentileOf(ttfa_ms, 0.99),
          kNone,
          PercentileOf(rtf, 0.5),
          PercentileOf(rtf, 0.99),
          100.0 * stalled_answers / answers,
          audio > 0 ? stalled / audio * 60 : kNone,
          answers / wall,
          saturation,
          capacity,
          talker_capacity,
          limiting_stage,
          static_cast<double>(failed)};
}

int Run(int argc, char** argv) {
  StartWatchdog("omni_benchmark", absl::GetFlag(FLAGS_max_seconds));
  std::vector<int> concurrency;
  for (absl::string_view c : absl::StrSplit(absl::GetFlag(FLAGS_concurrency), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(c, &n) || n < 1) {
      std::cerr << "omni_benchmark: --concurrency: not a positive integer: '" << c << "'\n";
      return 2;
    }
    concurrency.push_back(n);
  }
  const std::vector<std::string> policies =
      absl::StrSplit(absl::GetFlag(FLAGS_policies), ',', absl::SkipEmpty());
  for (const std::string& policy : policies) {
    if (policy != "today" && policy != "deadline" && policy != "admission" &&
        policy != "sentence" && policy != "first_piece" && policy != "later_pieces") {
      std::cerr << "omni_benchmark: --policies: unknown policy '" << policy << "'\n";
      return 2;
    }
  }
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  const absl::Duration cell = absl::Seconds(absl::GetFlag(FLAGS_cell_seconds));
  const absl::Duration jitter = absl::Milliseconds(absl::GetFlag(FLAGS_jitter_buffer_ms));
  absl::StatusOr<Binaries> binaries = FindBinaries(argv[0]);
  absl::StatusOr<std::unique_ptr<TempDir>> dir = TempDir::Create();
  if (!binaries.ok() || !dir.ok()) {
    std::cerr << "omni_benchmark: " << (binaries.ok() ? dir.status() : binaries.status()).message()
              << "\n";
    return 2;
  }
  const std::string header = RunHeader(argc, argv);
  Table table(
      absl::StrCat("omni: thinker -> talker -> vocoder (batches of 64), clients asking for ",
                   absl::GetFlag(FLAGS_sentences), "-sentence spoken answers back to back for ",
                   absl::FormatDuration(cell), ", jitter buffer ", absl::FormatDuration(jitter)),
      {"TTFA p50 ms", "TTFA p99 ms", "p99 x c1", "RTF p50", "RTF p99", "stalled %",
       "stall s/audio min", "answers/s", "talker sat", "audio cap", "talker cap", "limit stage",
       "failed"});
  for (int run = 0; run < runs; ++run) {
    for (const std::string& policy : policies) {
      absl::StatusOr<Server> orchestrator =
          StartOmniOrchestrator(*binaries, (*dir)->path(), policy);
      if (!orchestrator.ok()) {
        table.errors.push_back(
            absl::StrCat("run ", run + 1, ", ", policy, ": ", orchestrator.status().message()));
        continue;
      }
      double p99_at_one = kNone;
      for (int clients : concurrency) {
        std::fprintf(stderr, "omni_benchmark: run %d/%d: %s, %d client(s)\n", run + 1, runs,
                     policy.c_str(), clients);
        std::vector<double> figures = RunCell(orchestrator->port, clients, cell, jitter);
        if (clients == 1) p99_at_one = figures[1];
        figures[2] = p99_at_one > 0 ? figures[1] / p99_at_one : kNone;
        table.Add(absl::StrCat(policy, " c=", clients), run, std::move(figures));
      }
      StopServer(*orchestrator);
    }
  }
  return PrintTables("omni_benchmark", header, {table}, absl::GetFlag(FLAGS_json));
}

}  // namespace
}  // namespace bench
}  // namespace omnistage

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Measures time to first audio and playback stalls of an omni pipeline under load; see "
      "docs/benchmarks.md.");
  absl::ParseCommandLine(argc, argv);
  return omnistage::bench::Run(argc, argv);
}
