#include "common/production_stamp.h"

#include <time.h>

#include <string>

#include "absl/strings/match.h"

namespace omnistage {
namespace {

constexpr char kPrefix[] = "omnistage-stamp:";
constexpr size_t kPrefixSize = sizeof(kPrefix) - 1;

}  // namespace

int64_t MonotonicNowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
}

v1::Payload StampPayload(int64_t ns) {
  std::string raw(kPrefix, kPrefixSize);
  const uint64_t bits = static_cast<uint64_t>(ns);
  for (int i = 0; i < 8; ++i) raw.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  v1::Payload payload;
  payload.set_raw(std::move(raw));
  return payload;
}

std::optional<int64_t> StampOf(const v1::Payload& payload) {
  if (!payload.has_raw()) return std::nullopt;
  const std::string& raw = payload.raw();
  if (raw.size() != kPrefixSize + 8 || !absl::StartsWith(raw, kPrefix)) return std::nullopt;
  uint64_t bits = 0;
  for (int i = 0; i < 8; ++i) {
    bits |= static_cast<uint64_t>(static_cast<unsigned char>(raw[kPrefixSize + i])) << (8 * i);
  }
  return static_cast<int64_t>(bits);
}

}  // namespace omnistage
