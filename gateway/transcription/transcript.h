// Transcript: what the listening stage heard in an uploaded file, gathered
// from its text outputs (one TextDelta per utterance, its words timed:
// TextDelta.words), and written in each of OpenAI's transcription formats
// (docs/openai.md, "Transcriptions"):
//   json          {"text", "usage": {"type": "duration", "seconds"}}
//   text          the text and a newline
//   verbose_json  {"task", "language", "duration", "text", "segments": [{"id",
//                 "seek", "start", "end", "text", "tokens"}], "words" (when asked),
//                 "usage"}: a segment per utterance, times in seconds
//   srt, vtt      a cue per utterance
// Times are the recogniser's own (its word segmentation), never spread over
// the text. An utterance without timed words (text the stage passed through)
// takes the end of the one before it as its start and end.
#ifndef OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPT_H_
#define OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "protos/common.pb.h"

namespace omnistage {

class Transcript {
 public:
  struct Segment {
    std::string text;  // its words, separated by spaces
    int64_t start_ms = 0;
    int64_t end_ms = 0;
    std::vector<v1::TimedWord> words;
  };

  // `audio_ms`: the upload's length (verbose_json's duration, the usage).
  explicit Transcript(int64_t audio_ms) : audio_ms_(audio_ms) {}

  // Adds what the stage said; returns the text it adds to the transcript
  // (what a streamed transcript sends as its delta; "" for nothing).
  std::string Add(const v1::TextDelta& text);

  const std::string& text() const { return text_; }
  const std::vector<Segment>& segments() const { return segments_; }

  std::string Json() const;
  std::string Text() const;
  // `words`: with the word list (timestamp_granularities includes "word").
  std::string VerboseJson(bool words) const;
  std::string Srt() const;
  std::string Vtt() const;
  // The usage OpenAI reports for transcriptions billed by duration: whole
  // seconds, rounded up.
  int64_t billed_seconds() const { return (audio_ms_ + 999) / 1000; }

 private:
  const int64_t audio_ms_;
  std::string text_;
  std::vector<Segment> segments_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_GATEWAY_TRANSCRIPTION_TRANSCRIPT_H_
