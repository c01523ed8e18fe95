// Prefix-cache blocks: how an input is cut into blocks and how a block is named,
// one way for the engines' simulated prefix cache and the orchestrator's prefix
// index, so that both name the same prefix the same way (docs/routing.md).
//
// - Units: token ids are tokens; text counts kTextBytesPerToken bytes as one
//   token (about the ratio of English text under the usual tokenizers).
// - A block is `block_tokens` tokens: block_tokens * 4 bytes of text, or
//   block_tokens token ids (each taken as its 4 bytes, little-endian). Only
//   whole blocks are named; the rest of an input is cached by no one.
// - Names chain: block i's hash mixes block i-1's hash with block i's bytes, so
//   one hash stands for the whole prefix up to and including its block, as in
//   vLLM's prefix caching. Text and token ids start from different seeds.
// - The hash is a fixed 64-bit function of the bytes (not absl::Hash, which is
//   seeded per process): every process, and the Python engines
//   (stage_worker/engines/python/omnistage_engines/prefix_cache.py), compute the
//   same names. Not cryptographic: a collision only costs a wrong guess.
//
//   BlockHasher hasher(BlockHasher::Kind::kText, 16);
//   hasher.Append("You are a helpful assistant. ...");   // any chunking
//   for (uint64_t block : hasher.hashes()) ...
#ifndef OMNISTAGE_COMMON_PREFIX_BLOCKS_H_
#define OMNISTAGE_COMMON_PREFIX_BLOCKS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace omnistage {

// Bytes of text counted as one token.
inline constexpr int kTextBytesPerToken = 4;
// The block size engines and the orchestrator use when none is configured.
inline constexpr int kDefaultBlockTokens = 16;
// The largest block size accepted anywhere (a config, a worker's report).
inline constexpr int kMaxBlockTokens = 4096;

// The name of a block that follows the block named `previous` (or starts at a
// kind's seed), from its bytes.
uint64_t ChainBlockHash(uint64_t previous, absl::string_view bytes);

// Names the whole blocks of one input kind as its content arrives, in any
// chunking. Not thread-safe.
class BlockHasher {
 public:
  enum class Kind { kText, kTokens };

  // `block_tokens` in 1..kMaxBlockTokens.
  BlockHasher(Kind kind, int block_tokens);

  // Text (Kind::kText) or token ids (Kind::kTokens) that follow what came before.
  // Stops naming blocks once hashes() holds `max_blocks` of them.
  void Append(absl::string_view text);
  void Append(absl::Span<const int32_t> tokens);

  // One hash per whole block so far, in order.
  const std::vector<uint64_t>& hashes() const { return hashes_; }
  // Tokens seen so far, whole blocks and the rest.
  int64_t tokens() const { return bytes_ / kTextBytesPerToken; }
  int block_tokens() const { return block_tokens_; }
  void set_max_blocks(size_t max_blocks) { max_blocks_ = max_blocks; }

 private:
  void AppendBytes(absl::string_view bytes);

  const size_t block_bytes_;
  const int block_tokens_;
  uint64_t last_;
  std::string pending_;  // bytes after the last whole block
  int64_t bytes_ = 0;
  size_t max_blocks_ = std::numeric_limits<size_t>::max();
  std::vector<uint64_t> hashes_;
};

// Shorthands for a whole input at once.
std::vector<uint64_t> TextBlockHashes(absl::string_view text, int block_tokens);
std::vector<uint64_t> TokenBlockHashes(absl::Span<const int32_t> tokens, int block_tokens);

}  // namespace omnistage

#endif  // OMNISTAGE_COMMON_PREFIX_BLOCKS_H_
