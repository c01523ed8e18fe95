// Espeak: the process's one espeak-ng speech synthesizer (Debian's
// libespeak-ng, voice "en"), shared by the talker (text -> phonemes) and the
// vocoder (phonemes -> speech).
//
//   absl::StatusOr<Espeak*> espeak = Espeak::Get();
//   if (!espeak.ok()) return espeak.status();  // e.g. espeak-ng-data missing
//   std::vector<std::string> clauses = (*espeak)->Phonemes("Hello, world.");
//   // {"h@l'oU", "w'3:ld"}
//   absl::StatusOr<std::vector<int16_t>> pcm = (*espeak)->Speak("[[h@l'oU]]");
//   // 16-bit mono samples at (*espeak)->sample_rate_hz()
//
// espeak-ng is a C library with global state and no reentrancy, so there is one
// instance per process, initialized once, and every call holds one process-wide
// lock. Two more facts of espeak-ng 1.51 shape this class:
//
// - espeak_TextToPhonemes() keeps the next clause's first character between
//   calls; anything else espeak does in between loses it. Phonemes() therefore
//   translates a whole text under the lock.
// - Synthesis keeps state between calls in statics that no API call resets (the
//   pitch flutter's position, the glottal phase, a toggled harmonics table), so
//   in one process the same phonemes never sound quite the same twice, and
//   espeak_Terminate() followed by espeak_Initialize() hangs. To keep the
//   vocoder deterministic, Speak() synthesizes in a child process forked for
//   that one call: this process never synthesizes, so every synthesis starts
//   from the synthesizer state espeak had right after initialization, in every
//   process. (A fork costs about a millisecond; a clause takes a few to speak.)
//
// Thread-safe.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_ESPEAK_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_ESPEAK_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace omnistage {

class Espeak {
 public:
  // The process's instance, initialized by the first call. FAILED_PRECONDITION
  // with espeak-ng's own message when it cannot start (its data is missing:
  // Debian package espeak-ng-data); every later call returns the same.
  static absl::StatusOr<Espeak*> Get();

  Espeak(const Espeak&) = delete;
  Espeak& operator=(const Espeak&) = delete;

  // The rate of Speak()'s samples: espeak-ng's own (22050 Hz for Debian's).
  int sample_rate_hz() const { return sample_rate_hz_; }

  // espeak-ng's phonemes for UTF-8 `text`, one string per clause (espeak ends a
  // clause at sentence punctuation, commas, colons, and in very long runs of
  // words), clauses without phonemes left out. Each is written as espeak-ng
  // writes them: ASCII phoneme mnemonics, a space between words, a stress mark
  // (' or ,) before a stressed syllable's vowel. With `separator` (not '\0') that
  // character also stands between the phonemes of a word. NUL bytes read as
  // spaces; bytes that are not UTF-8 are skipped.
  std::vector<std::string> Phonemes(absl::string_view text, char separator = '\0');

  // 16-bit mono PCM at sample_rate_hz() speaking `text`: UTF-8 text whose parts
  // in [[ ]] are phoneme mnemonics as Phonemes() writes them (separator-free).
  // espeak leaves no pause after the last clause. `variant`: one of variants()
  // (a voice variant of "en": m3, f2, croak, ...), "" for espeak's default.
  // `voice`: another of espeak-ng's voices than "en" for this call (the
  // listener's tests speak "en-us", the accent pocketsphinx's model knows).
  // `words_per_minute`: the speaking rate, kMinWordsPerMinute to
  // kMaxWordsPerMinute; 0: espeak-ng's own (kDefaultWordsPerMinute).
  // INTERNAL when the synthesis process fails (e.g. fork() is refused, or the
  // variant or voice does not load).
  absl::StatusOr<std::vector<int16_t>> Speak(absl::string_view text,
                                             const std::string& variant = "",
                                             const std::string& voice = "",
                                             int words_per_minute = 0);
  // espeak-ng's speaking rates (espeakRATE), in words per minute.
  static constexpr int kDefaultWordsPerMinute = 175;
  static constexpr int kMinWordsPerMinute = 80;
  static constexpr int kMaxWordsPerMinute = 450;

  // The voice variants espeak-ng's data holds (the files of voices/!v), sorted.
  const std::vector<std::string>& variants() const { return variants_; }

  // The pause espeak-ng makes between a clause that ends in `punctuation` ('.',
  // ',', '?' or '!') and the next clause, in samples at sample_rate_hz(), for
  // whoever speaks clause by clause. Measured once per mark, by speaking a short
  // clause twice with and without the mark between.
  absl::StatusOr<int> PauseAfter(char punctuation);

 private:
  explicit Espeak(int sample_rate_hz) : sample_rate_hz_(sample_rate_hz) {}
  static absl::StatusOr<Espeak*> Create();

  absl::StatusOr<std::vector<int16_t>> SpeakLocked(const std::string& text,
                                                   const std::string& variant = "",
                                                   const std::string& voice = "",
                                                   int words_per_minute = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int sample_rate_hz_;
  std::vector<std::string> variants_;
  absl::Mutex mu_;                                   // Held around every espeak-ng call.
  std::map<char, int> pauses_ ABSL_GUARDED_BY(mu_);  // PauseAfter()'s results
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_SPEECH_ESPEAK_H_
