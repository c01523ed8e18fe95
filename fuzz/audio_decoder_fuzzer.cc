// Fuzz target: the gateway's decoding of an uploaded audio file
// (gateway/audio/audio_decoder.h: libsndfile from memory) on arbitrary bytes,
// with a limit of 2 s so that every run stays short.
//
// Properties, for every input:
// - DecodeAudioFile returns (no crash, no exception escapes, no hang, no read
//   outside the bytes given);
// - a refusal is INVALID_ARGUMENT with a message;
// - decoded audio is what a recogniser takes: samples (mono), a rate of 8 to
//   384 kHz, 1 to 32 channels, a format named, and no more than the limit
//   (the decoder refuses as soon as what it decoded passes the limit, so
//   nothing accepted is longer).
//
// libsndfile's mp3 decoder (libmpg123) writes a note to stderr for every bad
// frame it skips over: tens of megabytes of log a minute. Its stderr is
// /dev/null while it decodes (FUZZ_TRACE=1 keeps it); sanitizer reports go to
// the real one (libFuzzer's own lines about a crash inside the decoder are lost
// with libsndfile's; the input is kept all the same).
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "fuzz/fuzz_check.h"
#include "gateway/audio/audio_decoder.h"

// In builds with a sanitizer: where its reports go.
extern "C" void __sanitizer_set_report_fd(void* fd) __attribute__((weak));

namespace {

constexpr double kMaxSeconds = 2;

// The real stderr and /dev/null; -1 when libsndfile's messages are kept.
int stderr_fd = -1;
int null_fd = -1;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (std::getenv("FUZZ_TRACE") != nullptr) return 0;
  stderr_fd = dup(STDERR_FILENO);
  null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (stderr_fd < 0 || null_fd < 0) {
    stderr_fd = null_fd = -1;
    return 0;
  }
  if (__sanitizer_set_report_fd != nullptr) {
    __sanitizer_set_report_fd(reinterpret_cast<void*>(static_cast<intptr_t>(stderr_fd)));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  if (null_fd >= 0) dup2(null_fd, STDERR_FILENO);
  absl::StatusOr<omnistage::DecodedAudio> decoded = omnistage::DecodeAudioFile(bytes, kMaxSeconds);
  if (stderr_fd >= 0) dup2(stderr_fd, STDERR_FILENO);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kInvalidArgument, "refused with ",
               decoded.status().ToString());
    FUZZ_CHECK(!decoded.status().message().empty(), "a refusal without a message");
    return 0;
  }
  const omnistage::DecodedAudio& audio = *decoded;
  FUZZ_CHECK(!audio.mono.empty(), "decoded no samples (", audio.format, ")");
  FUZZ_CHECK(audio.sample_rate_hz >= 8000 && audio.sample_rate_hz <= 384000, "a rate of ",
             audio.sample_rate_hz, " Hz (", audio.format, ")");
  FUZZ_CHECK(audio.channels >= 1 && audio.channels <= 32, audio.channels, " channels (",
             audio.format, ")");
  FUZZ_CHECK(!audio.format.empty(), "no format named");
  FUZZ_CHECK(static_cast<double>(audio.mono.size()) <= kMaxSeconds * audio.sample_rate_hz,
             audio.mono.size(), " samples at ", audio.sample_rate_hz, " Hz (", audio.seconds(),
             " s) past the ", kMaxSeconds, " s limit (", audio.format, ")");
  return 0;
}
