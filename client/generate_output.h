// GenerateOutput: what `omni generate` and `omni speak` do with a Generate
// stream's responses — text to stdout as it arrives, a progress marker for
// audio (stream_printer.h), the audio kept for a WAV file — and how the call
// ended, as a message on stderr and the CLI's exit code.
#ifndef OMNISTAGE_CLIENT_GENERATE_OUTPUT_H_
#define OMNISTAGE_CLIENT_GENERATE_OUTPUT_H_

#include <string>
#include <utility>
#include <vector>

#include "client/stream_printer.h"
#include "common/wav_writer.h"
#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.pb.h"

namespace omnistage {

// The CLI's exit codes.
inline constexpr int kOk = 0, kError = 1, kUsage = 2, kAborted = 3, kUnreachable = 4,
                     kInterrupted = 130;

// A gRPC status code's name ("UNAVAILABLE"); "CODE 42" for a number that is none.
std::string CodeName(int code);
// "no stage 9 (INVALID_ARGUMENT)": a call's status, or an Error a response carried.
std::string Describe(const grpc::Status& status);
std::string Describe(const v1::Error& error);

class GenerateOutput {
 public:
  // One response: prints its outputs and keeps its audio and terminal.
  void Add(const v1::GenerateResponse& response);
  // The `command`'s stream ended with `status`: saves the audio to `wav_path` (also what
  // arrived before an abort; "" says how much was not saved), says how the
  // request ended and returns the exit code. `interrupted`: the user pressed
  // Ctrl-C and the call was cancelled.
  int End(const grpc::Status& status, const std::string& command, const std::string& wav_path,
          bool interrupted);

  // Text from several stages (a listener's transcript, then a thinker's
  // answer) each on its own line after its stage's name: `names[s]` names
  // stage s ("stage s" past the end).
  void LabelStages(std::vector<std::string> names) {
    names_ = std::move(names);
    label_ = true;
  }

  double audio_seconds() const { return wav_.seconds(); }
  const std::string& request_id() const { return request_id_; }

 private:
  WavWriter wav_;
  StreamPrinter printer_;
  v1::Terminal terminal_;
  std::string request_id_;
  bool label_ = false;
  std::vector<std::string> names_;
  int last_text_stage_ = -1;
};

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_GENERATE_OUTPUT_H_
