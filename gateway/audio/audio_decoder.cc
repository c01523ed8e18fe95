#include "gateway/audio/audio_decoder.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace omnistage {
namespace {

constexpr int kMinRateHz = 8000;
constexpr int kMaxRateHz = 384000;
constexpr int kMaxChannels = 32;
// Frames decoded at a time.
constexpr sf_count_t kBlockFrames = 4096;
constexpr char kFormatsRead[] = "wav, flac, ogg (opus, vorbis), mp3";

// The bytes as a read-only file, for sf_open_virtual.
struct MemoryFile {
  absl::string_view bytes;
  sf_count_t position = 0;
};

sf_count_t Length(void* user) {
  return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size());
}

sf_count_t Seek(sf_count_t offset, int whence, void* user) {
  MemoryFile* file = static_cast<MemoryFile*>(user);
  sf_count_t base = 0;
  switch (whence) {
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = file->position; break;
    case SEEK_END: base = static_cast<sf_count_t>(file->bytes.size()); break;
    default: return -1;
  }
  // Past the end is allowed, as lseek allows it; reads there find nothing.
  if (offset < -base || offset > std::numeric_limits<sf_count_t>::max() - base) return -1;
  file->position = base + offset;
  return file->position;
}

sf_count_t Read(void* out, sf_count_t count, void* user) {
  MemoryFile* file = static_cast<MemoryFile*>(user);
  const sf_count_t size = static_cast<sf_count_t>(file->bytes.size());
  if (count <= 0 || file->position >= size) return 0;
  const sf_count_t n = std::min(count, size - file->position);
  std::memcpy(out, file->bytes.data() + file->position, static_cast<size_t>(n));
  file->position += n;
  return n;
}

sf_count_t Write(const void*, sf_count_t, void*) { return 0; }

sf_count_t Tell(void* user) { return static_cast<MemoryFile*>(user)->position; }

struct CloseSndfile {
  void operator()(SNDFILE* sndfile) const { sf_close(sndfile); }
};

std::string FormatName(int format) {
  switch (format & SF_FORMAT_TYPEMASK) {
    case SF_FORMAT_WAV:
    case SF_FORMAT_WAVEX: return "wav";
    case SF_FORMAT_AIFF: return "aiff";
    case SF_FORMAT_FLAC: return "flac";
    case SF_FORMAT_OGG: return "ogg";
    case SF_FORMAT_MPEG:
      switch (format & SF_FORMAT_SUBMASK) {
        case SF_FORMAT_MPEG_LAYER_I: return "mp1";
        case SF_FORMAT_MPEG_LAYER_II: return "mp2";
        default: return "mp3";
      }
  }
  SF_FORMAT_INFO info = {};
  info.format = format & SF_FORMAT_TYPEMASK;
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &info, sizeof(info)) == 0 &&
      info.extension != nullptr) {
    return info.extension;
  }
  return "audio";
}

uint32_t Uint32(absl::string_view four, bool big_endian) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    const uint8_t byte = static_cast<uint8_t>(four[big_endian ? i : 3 - i]);
    value = (value << 8) | byte;
  }
  return value;
}

// Whether a wav's "data" chunk or an aiff's "SSND" chunk promises more bytes
// than follow it. libsndfile reads such a file without a word (its frame count
// is what is there), so its header is read here. A length of 1 GiB or more is
// no promise: it is a stream writer's "to the end" (0xFFFFFFFF, 0x7FFFFFFF),
// and no upload holds that much.
bool AudioChunkCutShort(absl::string_view bytes) {
  if (bytes.size() < 12) return false;
  const absl::string_view container = bytes.substr(0, 4);
  const absl::string_view form = bytes.substr(8, 4);
  bool big_endian = false;
  absl::string_view audio_chunk;
  if ((container == "RIFF" || container == "RIFX") && form == "WAVE") {
    big_endian = container == "RIFX";
    audio_chunk = "data";
  } else if (container == "FORM" && (form == "AIFF" || form == "AIFC")) {
    big_endian = true;
    audio_chunk = "SSND";
  } else {
    return false;
  }
  size_t at = 12;
  while (at <= bytes.size() && bytes.size() - at >= 8) {
    const uint32_t size = Uint32(bytes.substr(at + 4, 4), big_endian);
    const size_t left = bytes.size() - at - 8;
    if (bytes.substr(at, 4) == audio_chunk) return size < (1u << 30) && size > left;
    if (size > left) return false;
    at += 8 + size + (size & 1);  // chunks are padded to an even length
  }
  return false;
}

// A wav's sound alone: its "fmt ", "fact" and "data" chunks in a new RIFF
// file, when it holds other chunks (LIST, bext, cue, ...). libsndfile's parser
// of those metadata chunks can loop for ever on sizes that lie (a LIST whose
// sub-chunk claims more than it holds), and the sound needs none of them.
// nullopt: not a wav, or nothing to leave out.
std::optional<std::string> WavSoundOnly(absl::string_view bytes) {
  if (bytes.size() < 12 || bytes.substr(8, 4) != "WAVE") return std::nullopt;
  const absl::string_view container = bytes.substr(0, 4);
  if (container != "RIFF" && container != "RIFX") return std::nullopt;
  const bool big_endian = container == "RIFX";
  std::string chunks;
  bool left_out = false;
  size_t at = 12;
  while (at <= bytes.size() && bytes.size() - at >= 8) {
    const absl::string_view id = bytes.substr(at, 4);
    const uint32_t size = Uint32(bytes.substr(at + 4, 4), big_endian);
    const size_t left = bytes.size() - at - 8;
    const size_t taken = std::min<size_t>(size, left);
    const size_t padded = taken + (taken & 1 && taken < left ? 1 : 0);
    if (id == "fmt " || id == "fact" || id == "data") {
      // A data chunk's size may run past the end (streamed, or cut short:
      // AudioChunkCutShort reads the original): kept as it was written.
      absl::StrAppend(&chunks, bytes.substr(at, 8 + padded));
    } else {
      left_out = true;
    }
    if (id == "data" || size > left) break;  // What follows the sound is not needed.
    at += 8 + padded;
  }
  if (!left_out) return std::nullopt;
  std::string wav(container);
  const uint32_t riff_size = static_cast<uint32_t>(4 + chunks.size());
  for (int i = 0; i < 4; ++i) {
    const int shift = big_endian ? 24 - 8 * i : 8 * i;
    wav.push_back(static_cast<char>((riff_size >> shift) & 0xff));
  }
  absl::StrAppend(&wav, "WAVE", chunks);
  return wav;
}

std::string SecondsText(double seconds) { return absl::StrCat(std::round(seconds * 100) / 100); }

absl::Status TooLong(double seconds, double max_seconds) {
  return absl::InvalidArgumentError(absl::StrCat("the audio is ", SecondsText(seconds),
                                                 " s long; the limit is ",
                                                 SecondsText(max_seconds), " s"));
}

absl::Status Truncated(const std::string& format) {
  return absl::InvalidArgumentError(absl::StrCat(
      "the ", format, " file is truncated: its header promises more audio than it holds"));
}

// libsndfile's floats are -1 to 1 (an integer format's sample / 32768).
int16_t ToInt16(float sample) {
  const float scaled = sample * 32768.0f;
  if (scaled >= 32767.0f) return 32767;
  if (scaled <= -32768.0f) return -32768;
  if (std::isnan(scaled)) return 0;
  return static_cast<int16_t>(std::lrint(scaled));
}

}  // namespace

double DecodedAudio::seconds() const {
  return sample_rate_hz > 0 ? static_cast<double>(mono.size()) / sample_rate_hz : 0;
}

absl::StatusOr<DecodedAudio> DecodeAudioFile(absl::string_view bytes, double max_seconds) {
  if (bytes.empty()) return absl::InvalidArgumentError("the audio file is empty");

  const std::optional<std::string> sound_only = WavSoundOnly(bytes);
  MemoryFile file{sound_only.has_value() ? absl::string_view(*sound_only) : bytes};
  SF_VIRTUAL_IO io = {Length, Seek, Read, Write, Tell};
  SF_INFO info = {};
  std::unique_ptr<SNDFILE, CloseSndfile> sndfile(sf_open_virtual(&io, SFM_READ, &info, &file));
  if (sndfile == nullptr) {
    // libsndfile keeps why an open failed in a static of its own: an open in
    // another thread at the same moment may change these words, not the outcome.
    return absl::InvalidArgumentError(
        absl::StrCat("the file is not audio in a format read here (", kFormatsRead,
                     "): libsndfile says \"", sf_strerror(nullptr), "\""));
  }

  DecodedAudio audio;
  audio.sample_rate_hz = info.samplerate;
  audio.channels = info.channels;
  audio.format = FormatName(info.format);
  if (info.samplerate < kMinRateHz || info.samplerate > kMaxRateHz) {
    return absl::InvalidArgumentError(
        absl::StrCat("the ", audio.format, " file's rate is ", info.samplerate,
                     " Hz; the rates taken are ", kMinRateHz, " to ", kMaxRateHz, " Hz"));
  }
  if (info.channels < 1 || info.channels > kMaxChannels) {
    return absl::InvalidArgumentError(absl::StrCat("the ", audio.format, " file has ",
                                                   info.channels, " channels; at most ",
                                                   kMaxChannels, " are taken"));
  }
  if (AudioChunkCutShort(bytes)) return Truncated(audio.format);

  // The frame count of these is their header's and exact (an mp3's may be an
  // estimate from its size; an ogg's is unknown when its end is missing).
  const int type = info.format & SF_FORMAT_TYPEMASK;
  const bool exact_length = (type == SF_FORMAT_WAV || type == SF_FORMAT_WAVEX ||
                             type == SF_FORMAT_AIFF || type == SF_FORMAT_FLAC) &&
                            info.frames != SF_COUNT_MAX;
  const double limit = max_seconds * info.samplerate;
  const sf_count_t max_frames =
      limit >= 9e18 ? SF_COUNT_MAX : limit > 0 ? static_cast<sf_count_t>(limit) : 0;
  if (exact_length && info.frames > max_frames) {
    return TooLong(static_cast<double>(info.frames) / info.samplerate, max_seconds);
  }
  // A header may claim any count: no more than the file's size is reserved.
  if (exact_length) {
    audio.mono.reserve(std::min(static_cast<size_t>(info.frames), bytes.size()));
  }

  // Floats: libsndfile hands every format's samples as -1 to 1 (sf_readf_short
  // would give a float wav's samples unscaled, all 0 or 1).
  const int channels = info.channels;
  std::vector<float> block(static_cast<size_t>(kBlockFrames * channels));
  sf_count_t read = 0;
  while ((read = sf_readf_float(sndfile.get(), block.data(), kBlockFrames)) > 0) {
    for (sf_count_t frame = 0; frame < read; ++frame) {
      const float* samples = &block[static_cast<size_t>(frame * channels)];
      float sum = 0;
      for (int c = 0; c < channels; ++c) sum += samples[c];
      audio.mono.push_back(ToInt16(sum / channels));
    }
    const sf_count_t decoded = static_cast<sf_count_t>(audio.mono.size());
    if (decoded > max_frames) {
      // The header's count, when there is one, says how long; else all that is
      // known is that the limit is passed.
      if (info.frames != SF_COUNT_MAX && info.frames > decoded) {
        return TooLong(static_cast<double>(info.frames) / info.samplerate, max_seconds);
      }
      return absl::InvalidArgumentError(absl::StrCat("the audio is more than ",
                                                     SecondsText(max_seconds),
                                                     " s long; the limit is ",
                                                     SecondsText(max_seconds), " s"));
    }
  }
  if (sf_error(sndfile.get()) != SF_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(absl::StrCat("the ", audio.format,
                                                   " file could not be decoded: libsndfile says \"",
                                                   sf_strerror(sndfile.get()), "\""));
  }
  if (exact_length && static_cast<sf_count_t>(audio.mono.size()) < info.frames) {
    return Truncated(audio.format);
  }
  if (audio.mono.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("the ", audio.format, " file holds no audio"));
  }
  return audio;
}

}  // namespace omnistage
