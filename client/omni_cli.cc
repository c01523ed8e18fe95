// omni: the command-line client of an omnistage orchestrator.
//
//   omni generate --prompt="Tell me about the sea." --wav=out.wav
//   omni abort --ids=req-1,req-2
//   omni status
//   omni utility --stage=1 --name=stats
//
// generate streams text to stdout as it arrives, shows a progress line for
// audio on stderr, and saves the audio as a WAV file. abort prints one line per
// id: aborted, not found, or failed (still in flight; retry) with the reason.
// Exit codes: 0 finished, 1 error (for abort: some id failed), 2 bad usage,
// 3 aborted, 4 orchestrator unreachable.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "common/flags_usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/wav_writer.h"
#include "common/modality.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

ABSL_FLAG(std::string, server, "127.0.0.1:50051", "orchestrator address (host:port)");
ABSL_FLAG(std::string, prompt, "", "generate: the prompt");
ABSL_FLAG(std::string, request_id, "", "generate: request id (default: assigned by the server)");
ABSL_FLAG(std::string, modalities, "", "generate: comma-separated outputs: text,audio,tokens");
ABSL_FLAG(std::string, wav, "omnistage.wav", "generate: where to save audio ('' to skip)");
ABSL_FLAG(std::vector<std::string>, max_tokens, {},
          "generate: per-stage max_tokens as stage:N, comma-separated (e.g. 0:64)");
ABSL_FLAG(int, timeout_s, 0, "deadline for the call in seconds (0: none)");
ABSL_FLAG(std::string, traceparent, "",
          "generate: a W3C traceparent (00-<trace id>-<parent id>-<flags>) sent as gRPC "
          "metadata; every stage's log lines about the request then carry its trace id");
ABSL_FLAG(std::string, ids, "", "abort: comma-separated request ids");
ABSL_FLAG(int, stage, 0, "utility: the stage");
ABSL_FLAG(std::string, name, "", "utility: the utility's name");

namespace omnistage {
namespace {

constexpr int kOk = 0, kError = 1, kUsage = 2, kAborted = 3, kUnreachable = 4;

std::string Describe(const grpc::Status& status) {
  return absl::StrCat(status.error_message(), " (", status.error_code(), ")");
}

// Connects within 5 s or says clearly that nothing answers at `server`.
std::shared_ptr<grpc::Channel> Connect(const std::string& server) {
  auto channel = grpc::CreateChannel(server, grpc::InsecureChannelCredentials());
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(5))) {
    std::cerr << "omni: cannot reach the orchestrator at " << server
              << " (is it running? start one with ./demo.sh --serve)\n";
    return nullptr;
  }
  return channel;
}

void SetDeadline(grpc::ClientContext* context) {
  const int seconds = absl::GetFlag(FLAGS_timeout_s);
  if (seconds > 0) {
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
  }
}

// Prints streamed text as it arrives with a live "[audio 1.28 s]" marker after it.
// On a terminal, the marker sits at the end of the last line and is redrawn as
// text and audio arrive (long lines are wrapped at word boundaries); otherwise
// text goes to stdout untouched and progress lines to stderr.
class StreamPrinter {
 public:
  StreamPrinter() : tty_(isatty(STDOUT_FILENO) && isatty(STDERR_FILENO)) {}

  void Text(const std::string& text) {
    printed_ = true;
    if (!tty_) {
      std::cout << text << std::flush;
      return;
    }
    line_ += text;
    size_t newline;
    while ((newline = line_.find('\n')) != std::string::npos) Commit(newline, 1);
    while (line_.size() > kWidth) {
      const size_t space = line_.rfind(' ', kWidth);
      Commit(space == std::string::npos || space == 0 ? kWidth : space, space == 0 ? 0 : 1);
    }
    Redraw();
  }

  void Audio(double seconds) {
    const bool new_second = static_cast<int>(seconds) > static_cast<int>(audio_);
    audio_ = seconds;
    if (tty_) {
      Redraw();
    } else if (new_second) {
      std::fprintf(stderr, "[audio %.2f s]\n", seconds);
    }
  }

  void End() {
    if (tty_) {
      std::cout << "\r\033[K" << line_;
      if (audio_ > 0) std::printf("  [audio %.2f s]", audio_);
      if (!line_.empty() || audio_ > 0) std::cout << "\n";
    } else if (printed_) {
      std::cout << "\n";
    }
    std::cout << std::flush;
  }

 private:
  static constexpr size_t kWidth = 72;

  // Moves line_[0, end) to the screen for good, dropping `skip` separator chars.
  void Commit(size_t end, size_t skip) {
    std::cout << "\r\033[K" << line_.substr(0, end) << "\n";
    line_.erase(0, end + skip);
  }

  void Redraw() {
    std::cout << "\r\033[K" << line_;
    if (audio_ > 0) std::printf("  [audio %.2f s]", audio_);
    std::cout << std::flush;
  }

  const bool tty_;
  bool printed_ = false;
  std::string line_;
  double audio_ = 0;
};

int Generate(v1::Orchestrator::Stub& stub) {
  v1::GenerateRequest request;
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
    v1::StageParameters* params = request.add_stage_params();
    params->set_stage_id(stage);
    params->set_max_tokens(tokens);
  }
  if (request.prompt().empty()) {
    std::cerr << "omni: generate needs --prompt\n";
    return kUsage;
  }
  grpc::ClientContext context;
  SetDeadline(&context);
  if (const std::string traceparent = absl::GetFlag(FLAGS_traceparent); !traceparent.empty()) {
    context.AddMetadata("traceparent", traceparent);
  }
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader =
      stub.Generate(&context, request);
  WavWriter wav;
  StreamPrinter printer;
  v1::GenerateResponse response;
  v1::Terminal terminal;
  std::string request_id;
  while (reader->Read(&response)) {
    request_id = response.request_id();
    for (const v1::OutputChunk& chunk : response.outputs()) {
      const v1::Payload& payload = chunk.payload();
      if (payload.has_text()) {
        printer.Text(payload.text().text());
      } else if (payload.has_audio()) {
        if (absl::Status s = wav.Append(payload.audio()); !s.ok()) {
          std::cerr << "omni: " << s.message() << "\n";
        }
        printer.Audio(wav.seconds());
      } else if (payload.has_tokens()) {
        printer.Text(absl::StrCat(absl::StrJoin(payload.tokens().ids(), " "), " "));
      }
    }
    if (response.has_terminal()) terminal = response.terminal();
  }
  printer.End();
  const grpc::Status status = reader->Finish();
  if (!status.ok()) {
    std::cerr << "omni: generate failed: " << Describe(status) << "\n";
    return status.error_code() == grpc::StatusCode::UNAVAILABLE ? kUnreachable : kError;
  }
  const std::string path = absl::GetFlag(FLAGS_wav);
  if (wav.bytes() > 0 && !path.empty()) {
    if (absl::Status s = wav.Save(path); !s.ok()) {
      std::cerr << "omni: " << s.message() << "\n";
      return kError;
    }
    std::fprintf(stderr, "omni: wrote %s (%.2f s of audio at %d Hz)\n", path.c_str(),
                 wav.seconds(), wav.sample_rate_hz());
  }
  switch (terminal.finish_reason()) {
    case v1::FINISH_REASON_STOP:
    case v1::FINISH_REASON_LENGTH:
      std::cerr << "omni: " << request_id << " finished ("
                << v1::FinishReason_Name(terminal.finish_reason()) << ")\n";
      return kOk;
    case v1::FINISH_REASON_ABORT:
      std::cerr << "omni: " << request_id << " was aborted\n";
      return kAborted;
    default:
      std::cerr << "omni: " << request_id << " failed: " << terminal.error().message() << "\n";
      return kError;
  }
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
  SetDeadline(&context);
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
        std::cout << "failed\t" << result.error().message() << "\n";
        rc = kError;
        break;
      default:
        std::cout << "not found\n";
        break;
    }
  }
  return rc;
}

int PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::cout << json;
  return kOk;
}

int Status(v1::Orchestrator::Stub& stub) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::PipelineStatus response;
  const grpc::Status status = stub.GetPipelineStatus(&context, {}, &response);
  if (!status.ok()) {
    std::cerr << "omni: status failed: " << Describe(status) << "\n";
    return kError;
  }
  return PrintJson(response);
}

int Utility(v1::Orchestrator::Stub& stub) {
  v1::StageUtilityRequest request;
  request.set_stage_id(absl::GetFlag(FLAGS_stage));
  request.set_name(absl::GetFlag(FLAGS_name));
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::StageUtilityResponse response;
  const grpc::Status status = stub.CallStageUtility(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "omni: utility failed: " << Describe(status) << "\n";
    return kError;
  }
  return PrintJson(response);
}

int Run(const std::vector<char*>& args) {
  const std::string command = args.size() > 1 ? args[1] : "";
  if (command != "generate" && command != "abort" && command != "status" &&
      command != "utility") {
    std::cerr << "usage: omni generate|abort|status|utility [flags]  (omni --help)\n";
    return kUsage;
  }
  std::shared_ptr<grpc::Channel> channel = Connect(absl::GetFlag(FLAGS_server));
  if (channel == nullptr) return kUnreachable;
  auto stub = v1::Orchestrator::NewStub(channel);
  if (command == "generate") return Generate(*stub);
  if (command == "abort") return Abort(*stub);
  if (command == "status") return Status(*stub);
  return Utility(*stub);
}

}  // namespace
}  // namespace omnistage

int main(int argc, char** argv) {
  omnistage::SetUsage(
      "omni generate|abort|status|utility [--server=host:port] [flags]: talks to an "
      "omnistage orchestrator.",
      "client/omni_cli.cc");
  return omnistage::Run(omnistage::ParseFlagsOrExit(argc, argv, "omni"));
}
