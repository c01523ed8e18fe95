#include "stage_worker/engines/models/talker_phonemes.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "stage_worker/engines/speech/phoneme_codes.h"

namespace omnistage {
namespace {

bool EndsSentence(char c) { return c == '.' || c == '!' || c == '?'; }
bool EndsClause(char c) { return c == ',' || c == ';' || c == ':'; }
bool IsSpace(char c) { return absl::ascii_isspace(static_cast<unsigned char>(c)); }

// The sentence's punctuation: its last visible character when that ends
// sentences, else '.'.
char SentencePunctuation(absl::string_view sentence) {
  sentence = absl::StripTrailingAsciiWhitespace(sentence);
  return !sentence.empty() && EndsSentence(sentence.back()) ? sentence.back() : '.';
}

class PhonemeTalkerRequest : public RequestGenerator {
 public:
  PhonemeTalkerRequest(Espeak* espeak, int codes_per_step, int first_piece_words,
                       const RequestSettings& settings)
      : espeak_(espeak),
        codes_per_step_(codes_per_step),
        first_piece_words_(first_piece_words),
        max_tokens_(settings.max_tokens) {}

  bool Ready(const RequestInput& input) const override {
    return next_ < codes_.size() || input.complete || NextPiece(input, false).length > 0;
  }

  GeneratedStep Step(const RequestInput& input) override {
    if (codes_.size() - next_ < static_cast<size_t>(codes_per_step_)) {
      const TextPiece piece = NextPiece(input, input.complete);
      if (piece.length > 0) {
        AppendPiece(Unread(input).substr(0, piece.length), piece.ends_sentence);
        consumed_ += piece.length;
      }
    }
    const size_t count = std::min({codes_.size() - next_, static_cast<size_t>(codes_per_step_),
                                   static_cast<size_t>(max_tokens_ - produced_)});
    GeneratedStep step;
    if (count > 0) {
      step.payloads.push_back(
          TokensPayload({codes_.begin() + next_, codes_.begin() + next_ + count}));
      next_ += count;
      produced_ += static_cast<uint32_t>(count);
    }
    if (next_ == codes_.size()) {
      codes_.clear();
      next_ = 0;
    }
    if (produced_ >= max_tokens_) {
      step.finish_reason = v1::FINISH_REASON_LENGTH;
    } else if (input.complete && consumed_ == input.text.size() && codes_.empty()) {
      step.finish_reason = v1::FINISH_REASON_STOP;
    }
    return step;
  }

 private:
  absl::string_view Unread(const RequestInput& input) const {
    return absl::string_view(input.text).substr(consumed_);
  }

  // The first piece by its rule, then sentences.
  TextPiece NextPiece(const RequestInput& input, bool complete) const {
    const absl::string_view unread = Unread(input);
    if (consumed_ == 0 && first_piece_words_ > 0) {
      return FirstPiece(unread, complete, first_piece_words_);
    }
    return TextPiece{SentenceLength(unread, complete), true};
  }

  // A piece that does not end its sentence ends with the within-a-sentence
  // clause end.
  void AppendPiece(absl::string_view piece, bool ends_sentence) {
    const std::vector<std::string> clauses = espeak_->Phonemes(piece, kPhonemeSeparator);
    for (size_t i = 0; i < clauses.size(); ++i) {
      AppendPhonemeCodes(clauses[i], &codes_);
      const bool last = i + 1 == clauses.size();
      codes_.push_back(ClauseEndCode(last && ends_sentence ? SentencePunctuation(piece) : ','));
    }
  }

  Espeak* const espeak_;
  const int codes_per_step_;
  const int first_piece_words_;
  const uint32_t max_tokens_;
  size_t consumed_ = 0;         // input bytes turned into codes
  std::vector<int32_t> codes_;  // codes made and not yet emitted, from next_
  size_t next_ = 0;
  uint32_t produced_ = 0;  // codes emitted
};

}  // namespace

size_t SentenceLength(absl::string_view text, bool complete) {
  // A sentence end at i needs text[i + 1], and the sentence may be at most
  // kMaxSentenceBytes long.
  const size_t last = std::min(text.size(), kMaxSentenceBytes + 1);
  for (size_t i = 0; i + 1 < last; ++i) {
    if (EndsSentence(text[i]) && absl::ascii_isspace(static_cast<unsigned char>(text[i + 1]))) {
      return i + 1;
    }
  }
  if (text.size() > kMaxSentenceBytes) {
    // A run too long to wait for its end: cut at its last white space, else
    // anywhere that is not inside a UTF-8 character.
    const absl::string_view run = text.substr(0, kMaxSentenceBytes);
    for (size_t i = run.size(); i > 0; --i) {
      if (absl::ascii_isspace(static_cast<unsigned char>(run[i - 1]))) return i;
    }
    size_t cut = run.size();
    while (cut > 1 && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) --cut;
    return cut;
  }
  return complete ? text.size() : 0;
}

TextPiece FirstPiece(absl::string_view text, bool complete, int words) {
  const size_t sentence = SentenceLength(text, complete);
  // Only what the sentence rule would read: a clause or word end needs the
  // white space after it.
  const size_t scan = sentence > 0 ? sentence : std::min(text.size(), kMaxSentenceBytes);
  int seen = 0;
  for (size_t i = 0; i < scan && i + 1 < text.size(); ++i) {
    if (i + 1 == sentence) break;  // The sentence ends first.
    if (!IsSpace(text[i + 1])) continue;
    if (EndsClause(text[i])) return {i + 1, false};
    if (!IsSpace(text[i]) && ++seen == words) return {i + 1, false};
  }
  return {sentence, sentence > 0};
}

std::unique_ptr<RequestGenerator> NewPhonemeTalkerRequest(Espeak* espeak, int codes_per_step,
                                                          int first_piece_words,
                                                          const RequestSettings& settings) {
  return std::make_unique<PhonemeTalkerRequest>(espeak, codes_per_step, first_piece_words,
                                                settings);
}

}  // namespace omnistage
