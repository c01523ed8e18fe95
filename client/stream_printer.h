// StreamPrinter: how `omni generate` shows a stream — text as it arrives with a
// live "[audio 1.28 s]" marker after it on a terminal; otherwise text to stdout
// untouched and audio progress to stderr at most once a second of wall time
// (a stream shorter than that prints none: the CLI's last line says how much
// audio came).
#ifndef OMNISTAGE_CLIENT_STREAM_PRINTER_H_
#define OMNISTAGE_CLIENT_STREAM_PRINTER_H_

#include <functional>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace omnistage {

// On a terminal, the marker sits at the end of the last line and is redrawn as
// text and audio arrive (long lines are wrapped at word boundaries).
class StreamPrinter {
 public:
  StreamPrinter();
  // For tests: `tty` instead of asking isatty(), `now` instead of the clock.
  StreamPrinter(bool tty, std::function<absl::Time()> now);

  void Text(const std::string& text);
  // The audio received so far, in seconds.
  void Audio(double seconds);
  // The stream ended: the last line and marker stay.
  void End();

 private:
  static constexpr size_t kWidth = 72;

  // Moves line_[0, end) to the screen for good, dropping `skip` separator chars.
  void Commit(size_t end, size_t skip);
  void Redraw();

  const bool tty_;
  const std::function<absl::Time()> now_;
  // Off a terminal: when the stream started, or the last progress line.
  absl::Time last_progress_;
  bool printed_ = false;
  std::string line_;
  double audio_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_STREAM_PRINTER_H_
