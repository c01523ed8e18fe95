// omni: the command-line client of an omnistage orchestrator.
//
//   omni generate --prompt="Tell me about the sea." --wav=out.wav
//   omni speak --wav=out.wav < text.txt     (a GenerateDuplex call: stdin streams in)
//   omni listen --wav=question.wav --reply_wav=answer.wav   (the WAV streams in)
//   omni abort --ids=req-1,req-2
//   omni status [--cluster] [--json] [--watch [--interval_s=2]]
//   omni utility --stage=1 --name=stats
//   omni batches --gateway=https://gateway:8000   (a gateway's batches running)
//
// generate streams text to stdout as it arrives, shows a progress line for
// audio on stderr, and saves the audio as a WAV file with --wav (also what
// arrived before an abort, a deadline or Ctrl-C). speak does the same while it
// sends stdin into the running request line by line (speak.h). abort prints one line per
// id: aborted, not found, or failed (still in flight; retry) with the reason.
// status prints a table per stage (status_table.h), or the JSON with --json.
// Exit codes: 0 finished, 1 error (for abort: some id failed; for utility:
// some replica's call failed, each named on stderr), 2 bad usage,
// 3 aborted, 4 no orchestrator answers at --server, 130 interrupted (Ctrl-C).
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/batches_command.h"
#include "client/connection.h"
#include "client/generate_output.h"
#include "client/listen.h"
#include "client/proto_json.h"
#include "client/speak.h"
#include "client/status_command.h"
#include "common/criticality.h"
#include "common/flags_usage.h"
#include "common/grpc/grpc_log.h"
#include "common/grpc/tls.h"
#include "common/limits.h"
#include "common/modality.h"
#include "common/utf8.h"
#include "common/wav_reader.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "orchestrator address (host:port)");
ABSL_FLAG(bool, tls, false,
          "connect over TLS (implied by --tls_ca/--tls_cert); the server's certificate must "
          "chain to --tls_ca (default: the system's roots) and name the host of --server");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA bundle the orchestrator's certificate must chain to");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate, for an orchestrator that requires one (with --tls_key)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_server_name, "",
          "the name the orchestrator's certificate must carry, when not the host of --server");
ABSL_FLAG(std::string, token_file, "",
          "file holding the bearer token to send (default: $OMNISTAGE_TOKEN, if set)");
ABSL_FLAG(std::string, gateway, "",
          "batches: the gateway's base URL (http://host:port or https://host:port; its "
          "certificate must chain to --tls_ca, default the system's roots)");
ABSL_FLAG(std::string, prompt, "",
          "generate: the prompt; speak: text sent before stdin's (optional)");
ABSL_FLAG(std::string, request_id, "", "generate: request id (default: assigned by the server)");
ABSL_FLAG(std::string, modalities, "", "generate: comma-separated outputs: text,audio,tokens");
ABSL_FLAG(std::string, wav, "",
          "listen: the WAV file (16-bit PCM) to stream in; generate and speak: save the "
          "audio as a WAV file here (also what arrived before an abort, "
          "a deadline or Ctrl-C); none when empty");
ABSL_FLAG(std::vector<std::string>, extra, {},
          "generate: engine parameters per stage as stage:key=value, comma-separated "
          "(e.g. 0:sentences=3)");
ABSL_FLAG(std::vector<std::string>, max_tokens, {},
          "generate: per-stage max_tokens as stage:N, comma-separated (e.g. 0:64)");
ABSL_FLAG(std::vector<std::string>, seed, {},
          "generate: per-stage seeds as stage:N, comma-separated (e.g. 0:7)");
ABSL_FLAG(int, priority, -1,
          "generate: 0..9, higher first when the orchestrator queues requests (-1: the "
          "identity's default)");
ABSL_FLAG(int, first_output_ms, 0,
          "generate: the latency objective for the first output, in ms from admission "
          "(0: none, or the identity's or pipeline's)");
ABSL_FLAG(int, first_audio_ms, 0,
          "generate: the latency objective for the first audio, in ms from admission (0: none, "
          "or the identity's or pipeline's)");
ABSL_FLAG(int, between_outputs_ms, 0,
          "generate: the latency objective for the mean time between outputs after the first, "
          "in ms (0: none, or the identity's or pipeline's)");
ABSL_FLAG(std::string, criticality, "",
          "generate: critical, standard or sheddable (a sheddable request predicted to miss its "
          "objective is refused at once); empty: the identity's or pipeline's, else standard");
ABSL_FLAG(bool, disable_failover, false,
          "generate: the request does not fail over: a replica that dies fails it, also on a "
          "stage with failover on");
ABSL_FLAG(std::string, session_key, "",
          "generate: the request's session (a conversation, a user; at most 256 bytes): "
          "requests with the same key prefer the replicas that served it before");
ABSL_FLAG(int, timeout_s, 0, "deadline for the call in whole seconds (0: none)");
ABSL_FLAG(std::string, traceparent, "",
          "generate: a W3C traceparent (00-<trace id>-<parent id>-<flags>) sent as gRPC "
          "metadata; every stage's log lines about the request then carry its trace id");
ABSL_FLAG(bool, by_word, false,
          "speak: send stdin word by word as it is typed (default: line by line)");
ABSL_FLAG(bool, latency, false,
          "speak: print, per input line, how long after its last character the first audio "
          "after it arrived");
ABSL_FLAG(std::string, reply_wav, "",
          "listen: save the reply's audio as a WAV file here; none when empty");
ABSL_FLAG(double, pace, 1.0,
          "listen: how many times real time --wav is sent (1: as a microphone; 0: as fast as "
          "the call takes it)");
ABSL_FLAG(int, chunk_ms, 100, "listen: the audio sent per message, in milliseconds");
ABSL_FLAG(std::string, ids, "", "abort: comma-separated request ids");
ABSL_FLAG(bool, cluster, false,
          "status: the whole cluster (every orchestrator sharing the workers, and each "
          "worker's freshest load)");
ABSL_FLAG(bool, json, false,
          "status: print the PipelineStatus as JSON (for programs) instead of the table; "
          "batches: the list of batches as JSON");
ABSL_FLAG(bool, watch, false,
          "status: print it again every --interval_s seconds until Ctrl-C (on a terminal, "
          "in place)");
ABSL_FLAG(double, interval_s, 2, "status --watch: seconds between refreshes (at least 0.1)");
ABSL_FLAG(int, stage, 0, "utility: the stage");
ABSL_FLAG(std::string, name, "", "utility: the utility's name");
ABSL_FLAG(std::vector<std::string>, args, {},
          "utility: its arguments, comma-separated; numbers, true and false are sent as "
          "such, anything else as text (e.g. --args=6,3)");

namespace omnistage {
namespace {

// Set by SIGINT while a generate streams; the stream is then cancelled.
std::atomic<bool> interrupted{false};
extern "C" void OnInterrupt(int) { interrupted.store(true); }

// The StageParameters of `stage` in `request`, added if missing.
v1::StageParameters* ParamsOf(v1::GenerateRequest& request, int stage) {
  for (v1::StageParameters& p : *request.mutable_stage_params()) {
    if (p.stage_id() == stage) return &p;
  }
  v1::StageParameters* p = request.add_stage_params();
  p->set_stage_id(stage);
  return p;
}

// The bearer token: --token_file's content, else $OMNISTAGE_TOKEN (connection.h).
std::string token;

// Every call's deadline and token.
void Prepare(grpc::ClientContext* context) {
  const int seconds = absl::GetFlag(FLAGS_timeout_s);
  if (seconds > 0) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

// The request the flags describe; kUsage (said on stderr) when they are wrong.
int BuildRequest(v1::GenerateRequest* out) {
  v1::GenerateRequest& request = *out;
  request.set_prompt(absl::GetFlag(FLAGS_prompt));
  request.set_request_id(absl::GetFlag(FLAGS_request_id));
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_modalities), ',', absl::SkipEmpty())) {
    absl::StatusOr<v1::Modality> modality = ParseModality(name);
    if (!modality.ok()) {
      std::cerr << "omni: --modalities: " << modality.status().message() << "\n";
      return kUsage;
    }
    request.add_output_modalities(*modality);
  }
  for (const std::string& spec : absl::GetFlag(FLAGS_max_tokens)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(spec, absl::MaxSplits(':', 1));
    int stage = 0;
    uint32_t tokens = 0;
    if (!absl::SimpleAtoi(kv.first, &stage) || !absl::SimpleAtoi(kv.second, &tokens)) {
      std::cerr << "omni: --max_tokens: expected stage:N, got '" << spec << "'\n";
      return kUsage;
    }
    ParamsOf(request, stage)->set_max_tokens(tokens);
  }
  if (const int priority = absl::GetFlag(FLAGS_priority); priority >= 0) {
    request.set_priority(priority);
  }
  // Checked by the orchestrator (INVALID_ARGUMENT naming the field).
  for (const auto& [name, ms] :
       {std::pair<const char*, int>{"first_output_ms", absl::GetFlag(FLAGS_first_output_ms)},
        {"first_audio_ms", absl::GetFlag(FLAGS_first_audio_ms)},
        {"between_outputs_ms", absl::GetFlag(FLAGS_between_outputs_ms)}}) {
    if (ms < 0) {
      std::cerr << "omni: --" << name << ": not a number of milliseconds: " << ms << "\n";
      return kUsage;
    }
  }
  if (absl::GetFlag(FLAGS_first_output_ms) > 0) {
    request.mutable_objectives()->set_first_output_ms(absl::GetFlag(FLAGS_first_output_ms));
  }
  if (absl::GetFlag(FLAGS_first_audio_ms) > 0) {
    request.mutable_objectives()->set_first_audio_ms(absl::GetFlag(FLAGS_first_audio_ms));
  }
  if (absl::GetFlag(FLAGS_between_outputs_ms) > 0) {
    request.mutable_objectives()->set_between_outputs_ms(absl::GetFlag(FLAGS_between_outputs_ms));
  }
  if (const std::string name = absl::GetFlag(FLAGS_criticality); !name.empty()) {
    std::optional<v1::Criticality> criticality = ParseCriticality(name);
    if (!criticality.has_value()) {
      std::cerr << "omni: --criticality: expected critical, standard or sheddable, got '" << name
                << "'\n";
      return kUsage;
    }
    request.mutable_objectives()->set_criticality(*criticality);
  }
  request.set_disable_failover(absl::GetFlag(FLAGS_disable_failover));
  request.set_session_key(absl::GetFlag(FLAGS_session_key));
  if (request.session_key().size() > kMaxSessionKeyBytes) {
    std::cerr << "omni: --session_key: at most " << kMaxSessionKeyBytes << " bytes, got "
              << request.session_key().size() << "\n";
    return kUsage;
  }
  for (const std::string& spec : absl::GetFlag(FLAGS_seed)) {
    std::pair<std::string, std::string> kv = absl::StrSplit(spec, absl::MaxSplits(':', 1));
    int stage = 0;
    uint64_t seed = 0;
    if (!absl::SimpleAtoi(kv.first, &stage) || !absl::SimpleAtoi(kv.second, &seed)) {
      std::cerr << "omni: --seed: expected stage:N, got '" << spec << "'\n";
      return kUsage;
    }
    ParamsOf(request, stage)->set_seed(seed);
  }
  for (const std::string& spec : absl::GetFlag(FLAGS_extra)) {
    const size_t colon = spec.find(':');
    const size_t eq = spec.find('=');
    int stage = 0;
    if (colon == std::string::npos || eq == std::string::npos || eq < colon ||
        !absl::SimpleAtoi(spec.substr(0, colon), &stage) || eq == colon + 1) {
      std::cerr << "omni: --extra: expected stage:key=value, got '" << spec << "'\n";
      return kUsage;
    }
    (*ParamsOf(request, stage)->mutable_extra())[spec.substr(colon + 1, eq - colon - 1)] =
        spec.substr(eq + 1);
  }
  return kOk;
}

// A Generate or speak call's deadline, token and trace context.
void PrepareGenerate(grpc::ClientContext* context) {
  Prepare(context);
  if (const std::string traceparent = absl::GetFlag(FLAGS_traceparent); !traceparent.empty()) {
    context->AddMetadata("traceparent", traceparent);
  }
}

int Generate(v1::Orchestrator::Stub& stub) {
  v1::GenerateRequest request;
  if (const int usage = BuildRequest(&request); usage != kOk) return usage;
  if (request.prompt().empty()) {
    std::cerr << "omni: generate needs --prompt\n";
    return kUsage;
  }
  grpc::ClientContext context;
  PrepareGenerate(&context);
  // Ctrl-C cancels the call (the orchestrator then aborts the request on every
  // stage); what arrived is kept.
  std::signal(SIGINT, OnInterrupt);
  std::atomic<bool> streaming{true};
  std::thread watcher([&] {
    while (streaming.load() && !interrupted.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (interrupted.load()) context.TryCancel();
  });
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  GenerateOutput output;
  v1::GenerateResponse response;
  while (reader->Read(&response)) output.Add(response);
  const grpc::Status status = reader->Finish();
  streaming = false;
  watcher.join();
  std::signal(SIGINT, SIG_DFL);
  return output.End(status, "generate", absl::GetFlag(FLAGS_wav), interrupted.load());
}

int Speak(v1::Orchestrator::Stub& stub) {
  v1::GenerateRequest request;
  if (const int usage = BuildRequest(&request); usage != kOk) return usage;
  grpc::ClientContext context;
  PrepareGenerate(&context);
  SpeakOptions options;
  options.by_word = absl::GetFlag(FLAGS_by_word);
  options.latency = absl::GetFlag(FLAGS_latency);
  options.wav = absl::GetFlag(FLAGS_wav);
  std::signal(SIGINT, OnInterrupt);
  const int rc =
      omnistage::Speak(stub, &context, std::move(request), options, STDIN_FILENO, interrupted);
  std::signal(SIGINT, SIG_DFL);
  return rc;
}

// The pipeline's stage names, for listen's labels; none when the status call
// is refused (it needs an admin token when tokens are on).
std::vector<std::string> StageNames(v1::Orchestrator::Stub& stub) {
  grpc::ClientContext context;
  Prepare(&context);
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::PipelineStatus status;
  std::vector<std::string> names;
  if (!stub.GetPipelineStatus(&context, v1::PipelineStatusRequest(), &status).ok()) return names;
  for (const v1::StageStatus& stage : status.stages()) names.push_back(stage.name());
  return names;
}

int Listen(v1::Orchestrator::Stub& stub) {
  const std::string path = absl::GetFlag(FLAGS_wav);
  if (path.empty()) {
    std::cerr << "omni: listen needs --wav=FILE (16-bit PCM) to stream in\n";
    return kUsage;
  }
  absl::StatusOr<v1::AudioChunk> audio = ReadWav(path);
  if (!audio.ok()) {
    std::cerr << "omni: --wav: " << audio.status().message() << "\n";
    return kUsage;
  }
  ListenOptions options;
  options.chunk_ms = absl::GetFlag(FLAGS_chunk_ms);
  options.pace = absl::GetFlag(FLAGS_pace);
  options.reply_wav = absl::GetFlag(FLAGS_reply_wav);
  if (options.chunk_ms < 1 || options.chunk_ms > 10000 || options.pace < 0) {
    std::cerr << "omni: --chunk_ms must be in 1..10000 and --pace >= 0\n";
    return kUsage;
  }
  v1::GenerateRequest request;
  if (const int usage = BuildRequest(&request); usage != kOk) return usage;
  options.stage_names = StageNames(stub);
  grpc::ClientContext context;
  PrepareGenerate(&context);
  std::signal(SIGINT, OnInterrupt);
  const int rc =
      omnistage::Listen(stub, &context, std::move(request), *audio, options, interrupted);
  std::signal(SIGINT, SIG_DFL);
  return rc;
}

int Abort(v1::Orchestrator::Stub& stub) {
  v1::AbortRequest request;
  for (absl::string_view id : absl::StrSplit(absl::GetFlag(FLAGS_ids), ',', absl::SkipEmpty())) {
    request.add_request_ids(std::string(id));
  }
  if (request.request_ids_size() == 0) {
    std::cerr << "omni: abort needs --ids\n";
    return kUsage;
  }
  grpc::ClientContext context;
  Prepare(&context);
  v1::AbortResponse response;
  const grpc::Status status = stub.Abort(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "omni: abort failed: " << Describe(status) << "\n";
    return kError;
  }
  int rc = kOk;
  for (const v1::AbortResult& result : response.results()) {
    std::cout << result.request_id() << "\t";
    switch (result.outcome()) {
      case v1::AbortResult::OUTCOME_ABORTED:
        std::cout << "aborted\n";
        break;
      case v1::AbortResult::OUTCOME_FAILED:
        // Still in flight: the abort can be retried.
        std::cout << "failed\t" << Describe(result.error()) << "\n";
        rc = kError;
        break;
      default:
        std::cout << "not found\n";
        break;
    }
  }
  return rc;
}

int Status(v1::Orchestrator::Stub& stub) {
  StatusOptions options;
  options.cluster = absl::GetFlag(FLAGS_cluster);
  options.json = absl::GetFlag(FLAGS_json);
  options.watch = absl::GetFlag(FLAGS_watch);
  options.interval_s = absl::GetFlag(FLAGS_interval_s);
  if (!(options.interval_s >= 0.1)) {
    std::cerr << "omni: --interval_s must be at least 0.1\n";
    return kUsage;
  }
  options.prepare = Prepare;
  // Ctrl-C ends --watch; without it, it ends the process as usual.
  if (options.watch) std::signal(SIGINT, OnInterrupt);
  const int rc = RunStatus(stub, options, interrupted);
  std::signal(SIGINT, SIG_DFL);
  return rc;
}

int Utility(v1::Orchestrator::Stub& stub) {
  v1::StageUtilityRequest request;
  request.set_stage_id(absl::GetFlag(FLAGS_stage));
  request.set_name(absl::GetFlag(FLAGS_name));
  for (const std::string& arg : absl::GetFlag(FLAGS_args)) {
    google::protobuf::Value* value = request.mutable_args()->add_values();
    double number = 0;
    if (arg == "true" || arg == "false") {
      value->set_bool_value(arg == "true");
    } else if (absl::SimpleAtod(arg, &number)) {
      value->set_number_value(number);
    } else {
      value->set_string_value(arg);
    }
  }
  grpc::ClientContext context;
  Prepare(&context);
  v1::StageUtilityResponse response;
  const grpc::Status status = stub.CallStageUtility(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "omni: utility failed: " << Describe(status) << "\n";
    return kError;
  }
  std::cout << ToJson(response);
  // The JSON is for machines (its codes are numbers); a person reads which
  // replicas failed, and how, here, and the exit code says whether any did.
  int rc = kOk;
  for (const v1::ReplicaUtilityResult& result : response.results()) {
    if (!result.has_error()) continue;
    std::cerr << "omni: replica " << result.replica()
              << (result.address().empty() ? "" : " (" + result.address() + ")") << ": "
              << CodeName(result.error().code()) << ": " << result.error().message() << "\n";
    rc = kError;
  }
  return rc;
}

int Run(const std::vector<char*>& args) {
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command != "generate" && command != "speak" && command != "listen" && command != "abort" &&
      command != "status" && command != "utility" && command != "batches") {
    std::cerr << "usage: omni generate|speak|listen|abort|status|utility|batches [flags]  (omni "
                 "--help)\n";
    return kUsage;
  }
  const TlsFiles tls{absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
                     absl::GetFlag(FLAGS_tls_ca)};
  if (absl::Status s = CheckTlsFiles(tls, TlsSide::kClient); !s.ok()) {
    std::cerr << "omni: --tls_cert/--tls_key/--tls_ca: " << s.message() << "\n";
    return kUsage;
  }
  absl::StatusOr<std::string> loaded = LoadToken(absl::GetFlag(FLAGS_token_file));
  if (!loaded.ok()) {
    std::cerr << "omni: " << loaded.status().message() << "\n";
    return kUsage;
  }
  token = *std::move(loaded);
  if (command == "batches") {
    if (absl::GetFlag(FLAGS_gateway).empty()) {
      std::cerr << "omni: batches needs --gateway=http(s)://host:port\n";
      return kUsage;
    }
    return RunBatches({absl::GetFlag(FLAGS_gateway), token, tls.ca, absl::GetFlag(FLAGS_json)});
  }
  // Protobuf's strings are UTF-8: an orchestrator could not read the request.
  for (const auto& [flag, text] :
       {std::make_pair("--prompt", absl::GetFlag(FLAGS_prompt)),
        std::make_pair("--request_id", absl::GetFlag(FLAGS_request_id))}) {
    if (std::optional<size_t> bad = FirstInvalidUtf8(text)) {
      std::cerr << "omni: " << flag << " is not valid UTF-8 (byte " << *bad
                << " is not part of a UTF-8 character); the request's text must be UTF-8\n";
      return kUsage;
    }
  }
  ConnectOptions connect;
  connect.tls = tls;
  connect.use_tls = absl::GetFlag(FLAGS_tls) || tls.enabled();
  connect.server_name = absl::GetFlag(FLAGS_tls_server_name);
  std::shared_ptr<grpc::Channel> channel = Connect(absl::GetFlag(FLAGS_server), connect);
  if (channel == nullptr) return kUnreachable;
  auto stub = v1::Orchestrator::NewStub(channel);
  if (command == "generate") return Generate(*stub);
  if (command == "speak") return Speak(*stub);
  if (command == "listen") return Listen(*stub);
  if (command == "abort") return Abort(*stub);
  if (command == "status") return Status(*stub);
  return Utility(*stub);
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  omnistage::RouteGrpcLogs();
  omnistage::SetUsage(
      "omni generate|speak|listen|abort|status|utility [--server=host:port] [flags]: talks to "
      "an omnistage orchestrator; omni batches --gateway=URL: a gateway's batches running.",
      "client/omni_cli.cc");
  return omnistage::Run(omnistage::ParseFlagsOrExit(argc, argv, "omni"));
}
