#include "common/prefix_blocks.h"

#include <algorithm>
#include <cstring>

namespace omnistage {
namespace {

constexpr uint64_t kTextSeed = 0x6f6d6e6974657874ULL;    // "omnitext"
constexpr uint64_t kTokensSeed = 0x6f6d6e69746f6b73ULL;  // "omnitoks"
constexpr uint64_t kWordMultiplier = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kFinalMultiplier = 0xd6e8feb86659fd93ULL;

// The `n` <= 8 bytes at `p`, little-endian.
uint64_t LoadWord(const char* p, size_t n) {
  uint64_t word = 0;
  for (size_t i = 0; i < n; ++i) word |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return word;
}

// The 8 bytes at `p`, little-endian: one load on a little-endian machine.
uint64_t LoadWord8(const char* p) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  uint64_t word;
  std::memcpy(&word, p, sizeof(word));
  return word;
#else
  return LoadWord(p, 8);
#endif
}

}  // namespace

uint64_t ChainBlockHash(uint64_t previous, absl::string_view bytes) {
  uint64_t h = previous ^ (uint64_t{bytes.size()} * kWordMultiplier);
  size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    h = (h ^ LoadWord8(bytes.data() + i)) * kWordMultiplier;
    h ^= h >> 29;
  }
  if (i < bytes.size()) {
    h = (h ^ LoadWord(bytes.data() + i, bytes.size() - i)) * kWordMultiplier;
    h ^= h >> 29;
  }
  h ^= h >> 32;
  h *= kFinalMultiplier;
  h ^= h >> 32;
  return h;
}

BlockHasher::BlockHasher(Kind kind, int block_tokens)
    : block_bytes_(static_cast<size_t>(block_tokens) * kTextBytesPerToken),
      block_tokens_(block_tokens),
      last_(kind == Kind::kText ? kTextSeed : kTokensSeed) {}

void BlockHasher::AppendBytes(absl::string_view bytes) {
  bytes_ += static_cast<int64_t>(bytes.size());
  if (hashes_.size() >= max_blocks_) return;
  // Whole blocks straight from `bytes` once `pending_` is empty.
  if (!pending_.empty()) {
    const size_t take = std::min(block_bytes_ - pending_.size(), bytes.size());
    pending_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (pending_.size() < block_bytes_) return;
    last_ = ChainBlockHash(last_, pending_);
    hashes_.push_back(last_);
    pending_.clear();
  }
  while (bytes.size() >= block_bytes_ && hashes_.size() < max_blocks_) {
    last_ = ChainBlockHash(last_, bytes.substr(0, block_bytes_));
    hashes_.push_back(last_);
    bytes.remove_prefix(block_bytes_);
  }
  if (hashes_.size() < max_blocks_) pending_.assign(bytes.data(), bytes.size());
}

void BlockHasher::Append(absl::string_view text) { AppendBytes(text); }

void BlockHasher::Append(absl::Span<const int32_t> tokens) {
  std::string bytes(tokens.size() * 4, '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    const uint32_t id = static_cast<uint32_t>(tokens[i]);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<char>((id >> (8 * b)) & 0xff);
  }
  AppendBytes(bytes);
}

std::vector<uint64_t> TextBlockHashes(absl::string_view text, int block_tokens) {
  BlockHasher hasher(BlockHasher::Kind::kText, block_tokens);
  hasher.Append(text);
  return hasher.hashes();
}

std::vector<uint64_t> TokenBlockHashes(absl::Span<const int32_t> tokens, int block_tokens) {
  BlockHasher hasher(BlockHasher::Kind::kTokens, block_tokens);
  hasher.Append(tokens);
  return hasher.hashes();
}

}  // namespace omnistage
