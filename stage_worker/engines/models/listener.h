// listener: the audio -> text stage, a speech recognizer (pocketsphinx with its
// en-us model, sphinx_decoder.h), streaming.
//
// Input: audio (AudioChunk: 16-bit little-endian PCM at any rate in [8000,
// 384000] Hz, 1 to 32 interleaved channels) and text, in pieces as they come
// (an Add with input_complete false, then AppendInput). Audio is mixed down to
// mono and resampled to 16 kHz as it arrives (resampler.h), then decoded in
// blocks of 100 ms, at most `audio_ms_per_step` of it per request per step,
// so recognition runs while the audio streams in. An utterance ends where
// pocketsphinx's voice activity detector hears silence after speech; its
// words are emitted then (one TextDelta, words separated by spaces, each in
// TextDelta.words with its start and end in the request's audio), once: a
// partial hypothesis may still change, so none is emitted. Text input passes
// through unchanged, in order: the audio before it is finished as an
// utterance and its words emitted first (so a voice agent takes typed text
// too). Once the input is complete and decoded, the last utterance's words
// are emitted and the request finishes with FINISH_REASON_STOP. max_tokens
// does not apply: the output is bounded by the input.
//
// An audio chunk of a bad format (a rate or channel count out of range, a byte
// count that is not whole frames) refuses the request, or fails only it when
// it comes streamed. Blocks are cut from each run of audio as resampled, not
// as it arrived, so the transcript does not depend on how the audio was
// chunked nor on what else runs; still the engine resumes by neither replay
// nor continuation (the replay test harness feeds text and tokens only).
//
// Parameters: `acoustic_model`, `language_model`, `dictionary` (default the
// en-us model of Debian's pocketsphinx-en-us under
// /usr/share/pocketsphinx/model/en-us), `cmn_init` (each request's initial
// cepstral mean, 13 comma-separated numbers; default the model's),
// `audio_ms_per_step` (default 500), and the batching parameters (batch_size
// default 4: one decoder, about 60 MB and most of a second to create, per
// batch slot, all created with the engine). Creating the engine fails with
// FAILED_PRECONDITION naming the file and the package when the model is
// missing.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_LISTENER_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_LISTENER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "stage_worker/engines/base/engine.h"

namespace omnistage {

inline constexpr char kListenerEngineName[] = "listener";

absl::StatusOr<std::unique_ptr<Engine>> CreateListenerEngine(
    const std::map<std::string, std::string>& params);

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_LISTENER_H_
