// `omni speak`: text from stdin into a running request (GenerateDuplex), its
// audio back as it comes — a voice that speaks as you type
// (docs/clients.md, "Streamed input").
//
// Each line (or, `by_word`, each word) is sent the moment it is read, so a
// sentence is spoken while the next is still being typed; end of input (Ctrl-D)
// half-closes the call, which completes the request's input. With `latency`,
// stderr gets one line per input line: how long after its last character the
// first audio after it arrived (meaningful when lines come slower than their
// speech is made, as a person types).
#ifndef OMNISTAGE_CLIENT_SPEAK_H_
#define OMNISTAGE_CLIENT_SPEAK_H_

#include <atomic>
#include <string>

#include "grpcpp/grpcpp.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

struct SpeakOptions {
  bool by_word = false;
  bool latency = false;
  std::string wav;
};

// Runs the call on `context` (its deadline and token already set) with
// `request` as its first message and the text read from `input_fd` after it;
// `interrupted` cancels it. Returns the CLI's exit code (generate_output.h).
int Speak(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
          v1::GenerateRequest request, const SpeakOptions& options, int input_fd,
          const std::atomic<bool>& interrupted);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_SPEAK_H_
