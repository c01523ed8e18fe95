#include "client/stream_printer.h"

#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <utility>

namespace omnistage {

StreamPrinter::StreamPrinter()
    : StreamPrinter(isatty(STDOUT_FILENO) && isatty(STDERR_FILENO), [] { return absl::Now(); }) {}

StreamPrinter::StreamPrinter(bool tty, std::function<absl::Time()> now)
    : tty_(tty), now_(std::move(now)), last_progress_(now_()) {}

void StreamPrinter::Text(const std::string& text) {
  printed_ = true;
  if (!tty_) {
    std::cout << text << std::flush;
    return;
  }
  line_ += text;
  size_t newline;
  while ((newline = line_.find('\n')) != std::string::npos) Commit(newline, 1);
  while (line_.size() > kWidth) {
    const size_t space = line_.rfind(' ', kWidth);
    Commit(space == std::string::npos || space == 0 ? kWidth : space, space == 0 ? 0 : 1);
  }
  Redraw();
}

void StreamPrinter::Audio(double seconds) {
  audio_ = seconds;
  if (tty_) {
    Redraw();
    return;
  }
  const absl::Time now = now_();
  if (now - last_progress_ < absl::Seconds(1)) return;
  last_progress_ = now;
  std::fprintf(stderr, "[audio %.2f s]\n", seconds);
}

void StreamPrinter::End() {
  if (tty_) {
    std::cout << "\r\033[K" << line_;
    if (audio_ > 0) std::printf("  [audio %.2f s]", audio_);
    if (!line_.empty() || audio_ > 0) std::cout << "\n";
  } else if (printed_) {
    std::cout << "\n";
  }
  std::cout << std::flush;
}

void StreamPrinter::Commit(size_t end, size_t skip) {
  std::cout << "\r\033[K" << line_.substr(0, end) << "\n";
  line_.erase(0, end + skip);
}

void StreamPrinter::Redraw() {
  std::cout << "\r\033[K" << line_;
  if (audio_ > 0) std::printf("  [audio %.2f s]", audio_);
  std::cout << std::flush;
}

}  // namespace omnistage
