#include "stage_worker/engines/speech/espeak.h"

#include <espeak-ng/espeak_ng.h>
#include <espeak-ng/speak_lib.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace omnistage {
namespace {

constexpr char kVoice[] = "en";

// The write end of the pipe to the parent, in a synthesis child only (which is
// single-threaded); -1 elsewhere.
int child_pcm_fd = -1;

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// espeak-ng's synthesis callback: runs only in a synthesis child, where it
// streams the samples to the parent. Returns 1 (stop) when the parent is gone.
int OnSamples(short* samples, int count, espeak_EVENT* /*events*/) {
  if (samples == nullptr || count <= 0) return 0;
  const bool ok = WriteAll(child_pcm_fd, reinterpret_cast<const char*>(samples),
                           static_cast<size_t>(count) * sizeof(short));
  return ok ? 0 : 1;
}

std::string ErrnoMessage(const char* what) {
  return absl::StrCat(what, ": ", std::strerror(errno));
}

// espeak-ng's message for `status`, with the file it names when it has one.
std::string StatusMessage(espeak_ng_STATUS status, espeak_ng_ERROR_CONTEXT context) {
  char* text = nullptr;
  size_t size = 0;
  std::string message;
  if (FILE* stream = open_memstream(&text, &size)) {
    espeak_ng_PrintStatusCodeMessage(status, stream, context);
    std::fclose(stream);
    message = std::string(absl::StripTrailingAsciiWhitespace(text == nullptr ? "" : text));
    std::free(text);
  }
  if (message.empty()) {
    char buffer[256];
    espeak_ng_GetStatusCodeMessage(status, buffer, sizeof(buffer));
    message = buffer;
  }
  return message;
}

// A copy of `text` that C string functions read whole.
std::string WithoutNuls(absl::string_view text) {
  std::string copy(text);
  std::replace(copy.begin(), copy.end(), '\0', ' ');
  return copy;
}

}  // namespace

absl::StatusOr<Espeak*> Espeak::Get() {
  // Built once, never destroyed: espeak-ng's state lives as long as the process.
  static const absl::StatusOr<Espeak*>* const kInstance = new absl::StatusOr<Espeak*>(Create());
  return *kInstance;
}

absl::StatusOr<Espeak*> Espeak::Create() {
  espeak_ng_InitializePath(nullptr);  // the data directory the package installed
  espeak_ng_ERROR_CONTEXT context = nullptr;
  espeak_ng_STATUS status = espeak_ng_Initialize(&context);
  if (status != ENS_OK) {
    const std::string message = StatusMessage(status, context);
    espeak_ng_ClearErrorContext(&context);
    return absl::FailedPreconditionError(
        absl::StrCat("espeak-ng cannot start: ", message,
                     " (on Debian its data comes with the package espeak-ng-data)"));
  }
  status = espeak_ng_InitializeOutput(ENOUTPUT_MODE_SYNCHRONOUS, 0, nullptr);
  if (status == ENS_OK) status = espeak_ng_SetVoiceByName(kVoice);
  if (status != ENS_OK) {
    return absl::FailedPreconditionError(absl::StrCat("espeak-ng cannot start (voice ", kVoice,
                                                      "): ", StatusMessage(status, nullptr)));
  }
  espeak_SetSynthCallback(&OnSamples);
  auto* espeak = new Espeak(espeak_ng_GetSampleRate());
  const char* data = nullptr;
  espeak_Info(&data);
  if (data != nullptr) {
    if (DIR* dir = opendir(absl::StrCat(data, "/voices/!v").c_str())) {
      while (const dirent* entry = readdir(dir)) {
        const std::string name = entry->d_name;
        const bool plain = !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
          return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
        if (plain) espeak->variants_.push_back(name);
      }
      closedir(dir);
    }
  }
  std::sort(espeak->variants_.begin(), espeak->variants_.end());
  return espeak;
}

std::vector<std::string> Espeak::Phonemes(absl::string_view text, char separator) {
  const std::string input = WithoutNuls(text);
  // Bits 8-23 of the phoneme mode: the separator; the low bits 0: ASCII names.
  const int mode = static_cast<int>(static_cast<unsigned char>(separator)) << 8;
  std::vector<std::string> clauses;
  absl::MutexLock lock(&mu_);
  const void* next = input.c_str();
  while (next != nullptr) {
    const char* phonemes = espeak_TextToPhonemes(&next, espeakCHARS_UTF8, mode);
    if (phonemes == nullptr) break;  // text it cannot decode; `next` did not move
    if (*phonemes != '\0') clauses.emplace_back(phonemes);
  }
  return clauses;
}

absl::StatusOr<std::vector<int16_t>> Espeak::Speak(absl::string_view text,
                                                   const std::string& variant,
                                                   const std::string& voice,
                                                   int words_per_minute) {
  if (words_per_minute != 0 &&
      (words_per_minute < kMinWordsPerMinute || words_per_minute > kMaxWordsPerMinute)) {
    return absl::InvalidArgumentError(absl::StrCat("espeak-ng speaks ", kMinWordsPerMinute,
                                                   " to ", kMaxWordsPerMinute,
                                                   " words a minute, not ", words_per_minute));
  }
  const std::string input = WithoutNuls(text);
  absl::MutexLock lock(&mu_);
  return SpeakLocked(input, variant, voice, words_per_minute);
}

absl::StatusOr<std::vector<int16_t>> Espeak::SpeakLocked(const std::string& text,
                                                         const std::string& variant,
                                                         const std::string& voice,
                                                         int words_per_minute) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(ErrnoMessage("espeak-ng: pipe"));
  const pid_t pid = fork();
  if (pid < 0) {
    const std::string message = ErrnoMessage("espeak-ng: fork");
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(message);
  }
  if (pid == 0) {
    // The child: only the forking thread exists here, and it held mu_, so no
    // espeak-ng call was under way; its synthesis state is the one right after
    // initialization. Synthesize, stream the samples, and leave without running
    // any of the parent's exit handlers.
    close(fds[0]);
    child_pcm_fd = fds[1];
    // Breathy variants mix in noise from the C library's rand(), whose state
    // the child inherits from whatever the worker drew from it: start it alike.
    srand(1);
    // A variant or voice is set here only, in the child: the parent's voice
    // never changes.
    if ((!variant.empty() || !voice.empty()) &&
        espeak_ng_SetVoiceByName(absl::StrCat(voice.empty() ? kVoice : voice,
                                              variant.empty() ? "" : "+", variant)
                                     .c_str()) != ENS_OK) {
      _exit(1);
    }
    // After the voice, which sets its own rate.
    if (words_per_minute != 0 && espeak_SetParameter(espeakRATE, words_per_minute, 0) != EE_OK) {
      _exit(1);
    }
    const espeak_ERROR error = espeak_Synth(text.c_str(), text.size() + 1, 0, POS_CHARACTER, 0,
                                            espeakCHARS_UTF8 | espeakPHONEMES, nullptr, nullptr);
    _exit(error == EE_OK ? 0 : 1);
  }
  close(fds[1]);
  std::string bytes;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  close(fds[0]);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError(ErrnoMessage("espeak-ng: waitpid"));
  }
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) {
    return absl::InternalError(
        absl::StrCat("espeak-ng: the synthesis process failed (wait status ", wait_status, ")"));
  }
  std::vector<int16_t> samples(bytes.size() / sizeof(int16_t));
  std::memcpy(samples.data(), bytes.data(), samples.size() * sizeof(int16_t));
  return samples;
}

absl::StatusOr<int> Espeak::PauseAfter(char punctuation) {
  if (punctuation != '.' && punctuation != ',' && punctuation != '?' && punctuation != '!') {
    return absl::InvalidArgumentError(
        absl::StrCat("espeak-ng: no clause pause for '", std::string(1, punctuation), "'"));
  }
  absl::MutexLock lock(&mu_);
  if (auto it = pauses_.find(punctuation); it != pauses_.end()) return it->second;
  // A clause of one short vowel: its own length barely depends on what follows.
  constexpr char kClause[] = "[[a#]]";
  absl::StatusOr<std::vector<int16_t>> alone = SpeakLocked(kClause);
  if (!alone.ok()) return alone.status();
  absl::StatusOr<std::vector<int16_t>> twice =
      SpeakLocked(absl::StrCat(kClause, std::string(1, punctuation), " ", kClause));
  if (!twice.ok()) return twice.status();
  const int pause =
      std::max(0, static_cast<int>(twice->size()) - 2 * static_cast<int>(alone->size()));
  pauses_.emplace(punctuation, pause);
  return pause;
}

}  // namespace omnistage
