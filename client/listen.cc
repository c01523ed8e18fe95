#include "client/listen.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include "client/duplex_call.h"
#include "client/generate_output.h"

namespace omnistage {
namespace {

// Sends `audio` in pieces of `chunk_ms`, `pace` times real time, until its end
// or `stop`.
void Feed(const v1::AudioChunk& audio, const ListenOptions& options, const SendInput& send,
          const std::atomic<bool>& stop) {
  const int channels = std::max(1, audio.channels());
  const size_t frame = 2 * static_cast<size_t>(channels);
  const size_t frames =
      std::max<size_t>(1, static_cast<size_t>(audio.sample_rate_hz()) * options.chunk_ms / 1000);
  const std::string& pcm = audio.pcm_s16le();
  const auto start = std::chrono::steady_clock::now();
  for (size_t at = 0; at < pcm.size() && !stop.load(); at += frames * frame) {
    v1::GenerateInput message;
    v1::AudioChunk* piece = message.mutable_input()->add_payloads()->mutable_audio();
    piece->set_pcm_s16le(pcm.substr(at, frames * frame));
    piece->set_sample_rate_hz(audio.sample_rate_hz());
    piece->set_channels(channels);
    if (!send(message)) return;
    if (options.pace <= 0) continue;
    // As a microphone: the next piece when its audio would have been heard.
    const double sent_s = static_cast<double>(at / frame + frames) / audio.sample_rate_hz();
    const auto due = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                 std::chrono::duration<double>(sent_s / options.pace));
    while (!stop.load() && std::chrono::steady_clock::now() < due) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
}

}  // namespace

int Listen(v1::Orchestrator::Stub& stub, grpc::ClientContext* context,
           v1::GenerateRequest request, const v1::AudioChunk& audio,
           const ListenOptions& options, const std::atomic<bool>& interrupted) {
  GenerateOutput output;
  output.LabelStages(options.stage_names);
  const grpc::Status status = RunDuplex(
      stub, context, std::move(request),
      [&](const SendInput& send, const std::atomic<bool>& stop) {
        Feed(audio, options, send, stop);
      },
      [&](const v1::GenerateResponse& response) { output.Add(response); }, interrupted);
  return output.End(status, "listen", options.reply_wav, interrupted.load());
}

}  // namespace omnistage
