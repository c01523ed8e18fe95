// Stable hashing and a small PRNG for the built-in engines.
//
// Engines must give the same output for the same input on every replica and in
// every process, so nothing here may depend on per-process state (absl::Hash and
// std::hash are seeded or implementation-defined, hence unsuitable).
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_PRNG_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_PRNG_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace omnistage {

// The splitmix64 finalizer: a bijective mix with good avalanche.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Combines a running hash with one more value; order-sensitive.
inline uint64_t HashCombine(uint64_t hash, uint64_t value) { return Mix64(hash ^ Mix64(value)); }

// 64-bit FNV-1a over bytes, then mixed: stable and cheap.
inline uint64_t HashBytes(absl::string_view bytes) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) hash = (hash ^ c) * 0x100000001b3ULL;
  return Mix64(hash);
}

inline uint64_t HashTokens(const std::vector<int32_t>& tokens) {
  uint64_t hash = Mix64(tokens.size());
  for (int32_t t : tokens) hash = HashCombine(hash, static_cast<uint32_t>(t));
  return hash;
}

// splitmix64 (Steele, Lea, Flood 2014): tiny state, fast, statistically fine for
// simulated sampling. Not for cryptography.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform enough in [0, n) for n far below 2^64; n must be > 0.
  uint64_t Below(uint64_t n) { return Next() % n; }

 private:
  uint64_t state_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_MODELS_PRNG_H_
