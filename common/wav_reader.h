// ReadWav: a RIFF/WAVE file of 16-bit PCM as one AudioChunk (what `omni listen`
// streams in). The inverse of wav_writer.h, for the files it writes and those
// common tools write (extra chunks such as LIST are skipped).
#ifndef OMNISTAGE_COMMON_WAV_READER_H_
#define OMNISTAGE_COMMON_WAV_READER_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/common.pb.h"

namespace omnistage {

// The samples of `bytes`, a WAV file's content. INVALID_ARGUMENT saying what
// is wrong: not RIFF/WAVE, no fmt or data chunk, not 16-bit PCM, a rate or
// channel count out of range, a truncated chunk.
absl::StatusOr<v1::AudioChunk> DecodeWav(absl::string_view bytes);
// Reads the file at `path` (NOT_FOUND, or as DecodeWav, the path first).
absl::StatusOr<v1::AudioChunk> ReadWav(const std::string& path);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_WAV_READER_H_
