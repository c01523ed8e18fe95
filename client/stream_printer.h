// StreamPrinter: how `omni generate` shows a stream — text as it arrives with a
// live "[audio 1.28 s]" marker after it on a terminal; otherwise text to stdout
// untouched and audio progress to stderr once a second.
#ifndef OMNISTAGE_CLIENT_STREAM_PRINTER_H_
#define OMNISTAGE_CLIENT_STREAM_PRINTER_H_

#include <string>

namespace omnistage {

// On a terminal, the marker sits at the end of the last line and is redrawn as
// text and audio arrive (long lines are wrapped at word boundaries).
class StreamPrinter {
 public:
  StreamPrinter();

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
  bool printed_ = false;
  std::string line_;
  double audio_ = 0;
};

}  // namespace omnistage

#endif  // OMNISTAGE_CLIENT_STREAM_PRINTER_H_
