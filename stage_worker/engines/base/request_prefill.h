// RequestPrefill: what one request's input costs to prefill, counted as the
// input arrives (docs/engines.md, "Prefix cache").
//
// - Text and token ids are prefilled, each kind its own input (its own blocks,
//   named by a BlockHasher, common/prefix_blocks.h); other payload kinds are
//   not. Output is never prefilled (nor cached).
// - Run(), once per step that sees new input: the whole blocks that arrived
//   since the previous run go through the engine's PrefixCache (hits cost
//   nothing, the rest is prefilled); the tokens after the last whole block wait
//   for more input, and are prefilled once the input is complete. So what a
//   request hits does not depend on how its input was chunked, nor on when the
//   chunks arrived: only on its input and on what the cache held.
// - Without a cache every token is prefilled, by the same rule.
//
// Not thread-safe: the engine's busy-loop thread owns it.
#ifndef OMNISTAGE_STAGE_WORKER_ENGINES_BASE_REQUEST_PREFILL_H_
#define OMNISTAGE_STAGE_WORKER_ENGINES_BASE_REQUEST_PREFILL_H_

#include <cstdint>

#include "common/prefix_blocks.h"
#include "protos/common.pb.h"
#include "stage_worker/engines/base/prefix_cache.h"

namespace omnistage {

class RequestPrefill {
 public:
  // `block_tokens` in 1..kMaxBlockTokens; `name_blocks`: false when the engine
  // has no cache (then blocks are counted, not named).
  RequestPrefill(int block_tokens, bool name_blocks);

  // Input that follows what came before.
  void Append(const v1::Payload& payload);
  // Runs the input that arrived since the previous call through `cache`
  // (nullptr: none), as above; `complete`: no more input will come. Returns the
  // tokens to prefill: those not found cached.
  int64_t Run(PrefixCache* cache, bool complete);

 private:
  // One kind of input.
  struct Input {
    Input(BlockHasher::Kind kind, int block_tokens, bool name_blocks);
    int64_t Run(PrefixCache* cache, bool complete);

    BlockHasher hasher;
    int64_t blocks_run = 0;  // whole blocks run so far
    int64_t tokens_run = 0;  // tokens run so far (the blocks', then the tail's)
    bool hitting = true;     // no block of it has missed yet
  };

  Input text_;
  Input tokens_;
};

}  // namespace omnistage

#endif  // OMNISTAGE_STAGE_WORKER_ENGINES_BASE_REQUEST_PREFILL_H_
