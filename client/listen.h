// `omni listen`: a WAV file streamed into a running request (GenerateDuplex)
// as a microphone would send it — in pieces of `chunk_ms`, `pace` times real
// time (0: as fast as the call takes them) — for a pipeline whose stage 0
// listens (a `listener`: pipelines/local_voice_agent.yaml). Each
// stage's text is printed on its own line after the stage's name (what was
// heard, then the answer), and the reply's audio is saved to `reply_wav`
// (docs/clients.md, "Streamed input").
#ifndef OMNISTAGE_CLIENT_LISTEN_H_
#define OMNISTAGE_CLIENT_LISTEN_H_

#include <atomic>
#include <string>
#include <vector>

#include "grpcpp/grpcpp.h"
#include "protos/common.pb.h"
#include "protos/orchestrator.grpc.pb.h"

namespace omnistage {

struct ListenOptions {
  int chunk_ms = 100;
  double pace = 1.0;
  std::string reply_wav;
  // The pipeline's stage names, for the labels (empty: "stage N").
  std::vector<std::string> stage_names;
};

// Runs the call on `context` with `request` first and `audio` after it;
// `interrupted` cancels it. Returns the CLI's exit code (generate_output.h).
int Listen(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
           v1::GenerateRequest request, const v1::AudioChunk& audio,
           const ListenOptions& options, const std::atomic<bool>& interrupted);

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_LISTEN_H_
