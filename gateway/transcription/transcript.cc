#include "gateway/transcription/transcript.h"

#include <cstdio>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace omnistage {
namespace {

using json = nlohmann::json;

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// "01:02:03,456" (srt) or "01:02:03.456" (vtt).
std::string CueTime(int64_t ms, char separator) {
  return absl::StrFormat("%02d:%02d:%02d%c%03d", ms / 3600000, ms / 60000 % 60, ms / 1000 % 60,
                         separator, ms % 1000);
}

json Usage(int64_t seconds) { return {{"type", "duration"}, {"seconds", seconds}}; }

}  // namespace

std::string Transcript::Add(const v1::TextDelta& delta) {
  const std::string said(absl::StripAsciiWhitespace(delta.text()));
  if (said.empty()) return "";
  Segment segment;
  segment.text = said;
  const int64_t previous_end = segments_.empty() ? 0 : segments_.back().end_ms;
  segment.words.assign(delta.words().begin(), delta.words().end());
  segment.start_ms = segment.words.empty() ? previous_end : segment.words.front().start_ms();
  segment.end_ms = segment.words.empty() ? previous_end : segment.words.back().end_ms();
  const std::string added = text_.empty() ? said : absl::StrCat(" ", said);
  text_ += added;
  segments_.push_back(std::move(segment));
  return added;
}

std::string Transcript::Json() const {
  return json({{"text", text_}, {"usage", Usage(billed_seconds())}}).dump();
}

std::string Transcript::Text() const { return absl::StrCat(text_, "\n"); }

std::string Transcript::VerboseJson(bool words) const {
  json segments = json::array();
  json all_words = json::array();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    // OpenAI's segments also carry the decoder's token ids and probabilities;
    // the recogniser here has none to give, so none are made up.
    segments.push_back({{"id", i},
                        {"seek", 0},
                        {"start", Seconds(s.start_ms)},
                        {"end", Seconds(s.end_ms)},
                        {"text", absl::StrCat(" ", s.text)},
                        {"tokens", json::array()}});
    for (const v1::TimedWord& w : s.words) {
      all_words.push_back(
          {{"word", w.word()}, {"start", Seconds(w.start_ms())}, {"end", Seconds(w.end_ms())}});
    }
  }
  json out = {{"task", "transcribe"},
              {"language", "english"},
              {"duration", Seconds(audio_ms_)},
              {"text", text_},
              {"segments", segments},
              {"usage", Usage(billed_seconds())}};
  if (words) out["words"] = all_words;
  return out.dump();
}

std::string Transcript::Srt() const {
  std::string out;
  for (size_t i = 0; i < segments_.size(); ++i) {
    const Segment& s = segments_[i];
    absl::StrAppend(&out, i + 1, "\n", CueTime(s.start_ms, ','), " --> ", CueTime(s.end_ms, ','),
                    "\n", s.text, "\n\n");
  }
  return out;
}

std::string Transcript::Vtt() const {
  std::string out = "WEBVTT\n\n";
  for (const Segment& s : segments_) {
    absl::StrAppend(&out, CueTime(s.start_ms, '.'), " --> ", CueTime(s.end_ms, '.'), "\n", s.text,
                    "\n\n");
  }
  return out;
}

}  // namespace omnistage
