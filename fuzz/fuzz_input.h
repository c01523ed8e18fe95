// FuzzInput: reads a fuzz input as a stream of small decisions.
//
// Stateful targets decode their operations from the input byte by byte; a
// read takes a fixed number of bytes, and a finished input reads as zeros, so
// every byte string is a valid (if short) program, a small mutation changes a
// small part of it, and seeds can be written by hand (fuzz/make_seeds.py).
//
//   FuzzInput in(data, size);
//   while (!in.empty()) {
//     switch (in.Below(3)) { case 0: ... in.Text(16) ...; }
//   }
#ifndef OMNISTAGE_FUZZ_FUZZ_INPUT_H_
#define OMNISTAGE_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace omnistage {
namespace fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return pos_ >= size_; }
  size_t remaining() const { return empty() ? 0 : size_ - pos_; }

  uint8_t Byte() { return empty() ? 0 : data_[pos_++]; }
  bool Bool() { return (Byte() & 1) != 0; }
  // Little-endian; the reads are sequenced (operands of | are not).
  uint32_t U16() {
    const uint32_t low = Byte();
    return low | static_cast<uint32_t>(Byte()) << 8;
  }
  uint32_t U32() {
    const uint32_t low = U16();
    return low | U16() << 16;
  }
  // A value in [0, n) for 0 < n <= 65536: one byte when n <= 256, else two,
  // whatever n is (so that an operation's encoding does not depend on state).
  uint32_t Below(uint32_t n) {
    const uint32_t raw = n <= 256 ? Byte() : U16();
    return n <= 1 ? 0 : raw % n;
  }
  // A value in [lo, hi].
  int InRange(int lo, int hi) { return lo + static_cast<int>(Below(hi - lo + 1)); }
  // Up to `max` bytes, the length first.
  std::string Text(size_t max) {
    size_t n = Below(static_cast<uint32_t>(max) + 1);
    if (n > remaining()) n = remaining();
    std::string text(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return text;
  }
  template <typename T>
  T Pick(const std::vector<T>& options) {
    return options[Below(static_cast<uint32_t>(options.size()))];
  }

 private:
  const uint8_t* const data_;
  const size_t size_;
  size_t pos_ = 0;
};

}  // namespace fuzz
}  // namespace omnistage

#endif  // OMNISTAGE_FUZZ_FUZZ_INPUT_H_
