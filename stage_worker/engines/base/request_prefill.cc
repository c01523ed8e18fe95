#include "stage_worker/engines/base/request_prefill.h"

namespace omnistage {

RequestPrefill::Input::Input(BlockHasher::Kind kind, int block_tokens, bool name_blocks)
    : hasher(kind, block_tokens) {
  if (!name_blocks) hasher.set_max_blocks(0);
}

RequestPrefill::RequestPrefill(int block_tokens, bool name_blocks)
    : text_(BlockHasher::Kind::kText, block_tokens, name_blocks),
      tokens_(BlockHasher::Kind::kTokens, block_tokens, name_blocks) {}

void RequestPrefill::Append(const v1::Payload& payload) {
  if (payload.has_text()) {
    text_.hasher.Append(payload.text().text());
  } else if (payload.has_tokens()) {
    tokens_.hasher.Append(payload.tokens().ids());
  }
}

int64_t RequestPrefill::Run(PrefixCache* cache, bool complete) {
  return text_.Run(cache, complete) + tokens_.Run(cache, complete);
}

int64_t RequestPrefill::Input::Run(PrefixCache* cache, bool complete) {
  const int64_t block_tokens = hasher.block_tokens();
  const int64_t whole = hasher.tokens() / block_tokens;
  int64_t prefilled = 0;
  if (whole > blocks_run) {
    const int64_t tokens = (whole - blocks_run) * block_tokens;
    int64_t hit = 0;
    if (cache != nullptr) {
      hit = cache->Run(
          absl::MakeConstSpan(hasher.hashes())
              .subspan(static_cast<size_t>(blocks_run), static_cast<size_t>(whole - blocks_run)),
          &hitting);
    }
    prefilled += tokens - hit;
    blocks_run = whole;
    tokens_run = whole * block_tokens;
  }
  if (complete && hasher.tokens() > tokens_run) {
    const int64_t tail = hasher.tokens() - tokens_run;
    if (cache != nullptr) cache->CountMiss(tail);
    prefilled += tail;
    tokens_run = hasher.tokens();
  }
  return prefilled;
}

}  // namespace omnistage
