"""A simulated prefix cache for Python engines: the model the C++ built-in
engines keep (stage_worker/engines/base/prefix_cache.h, request_prefill.h;
docs/engines.md, "Prefix cache"), with block names computed exactly as
common/prefix_blocks.cc computes them, so that the orchestrator and a Python
engine name a prefix alike.

- Blocks: text counts 4 UTF-8 bytes a token; token ids are tokens, each taken
  as its 4 bytes, little-endian two's complement. A block is `block_tokens`
  tokens; only whole blocks are named. Names chain (block i mixes block i-1's
  name with its bytes) from a seed per kind, with a fixed 64-bit function:
  BlockHasher gives the same names for any chunking of the same input.
- PrefixCache: at most `capacity_blocks` names; a full cache evicts its least
  recently used block to store another.
- RequestPrefill, once per step for each running request: text and token ids
  are each their own input. The whole blocks that arrived since the previous
  step go through the cache: the leading ones it holds are hits; from the
  first block it does not hold, every block of that input is a miss, held or
  not. Then every block of the run is stored, or touched if held, deepest
  first (the run's first block becomes the most recently used).
  The tokens after the last whole block wait for more input, and are a miss,
  never stored, once the input is complete. Output is not cached. Without a
  cache every token is a miss, by the same rule.
- Changes: each eviction (stored=False) and each block stored anew
  (stored=True), in order, until take_changes(); a touch is no change.
"""

import collections
import struct

MASK = (1 << 64) - 1
TEXT_BYTES_PER_TOKEN = 4
DEFAULT_BLOCK_TOKENS = 16
MAX_BLOCK_TOKENS = 4096

TEXT_SEED = 0x6F6D6E6974657874    # "omnitext"
TOKENS_SEED = 0x6F6D6E69746F6B73  # "omnitoks"
_WORD_MULTIPLIER = 0x9E3779B97F4A7C15
_FINAL_MULTIPLIER = 0xD6E8FEB86659FD93


def chain_block_hash(previous, data):
    """The name of the block with bytes `data` after the block named
    `previous` (or after a kind's seed)."""
    h = previous ^ ((len(data) * _WORD_MULTIPLIER) & MASK)
    whole = len(data) // 8
    words = list(struct.unpack_from(f"<{whole}Q", data))
    if len(data) > whole * 8:
        words.append(int.from_bytes(data[whole * 8:], "little"))
    for word in words:
        h = ((h ^ word) * _WORD_MULTIPLIER) & MASK
        h ^= h >> 29
    h ^= h >> 32
    h = (h * _FINAL_MULTIPLIER) & MASK
    return h ^ (h >> 32)


def _token_bytes(tokens):
    return struct.pack(f"<{len(tokens)}I", *(t & 0xFFFFFFFF for t in tokens))


class BlockHasher:
    """Names the whole blocks of one input kind ("text": str chunks, "tokens":
    lists of ids) as its content arrives. `hashes` holds one name per whole
    block so far; `tokens` counts every token so far. With max_blocks=0 it
    only counts."""

    def __init__(self, kind, block_tokens, max_blocks=None):
        self.kind = kind
        self.block_tokens = block_tokens
        self.hashes = []
        self._block_bytes = block_tokens * TEXT_BYTES_PER_TOKEN
        self._last = TEXT_SEED if kind == "text" else TOKENS_SEED
        self._pending = b""
        self._bytes = 0
        self._max_blocks = max_blocks

    @property
    def tokens(self):
        return self._bytes // TEXT_BYTES_PER_TOKEN

    def append(self, chunk):
        data = chunk.encode() if self.kind == "text" else _token_bytes(chunk)
        self._bytes += len(data)
        if self._max_blocks is not None and len(self.hashes) >= self._max_blocks:
            return
        data = self._pending + data
        at = 0
        while len(data) - at >= self._block_bytes and (
                self._max_blocks is None or len(self.hashes) < self._max_blocks):
            self._last = chain_block_hash(self._last, data[at:at + self._block_bytes])
            self.hashes.append(self._last)
            at += self._block_bytes
        self._pending = data[at:]


def text_block_hashes(text, block_tokens):
    hasher = BlockHasher("text", block_tokens)
    hasher.append(text)
    return hasher.hashes


def token_block_hashes(tokens, block_tokens):
    hasher = BlockHasher("tokens", block_tokens)
    hasher.append(tokens)
    return hasher.hashes


class _KindInput:
    """One kind of a request's input: its blocks, and how much of it ran."""

    __slots__ = ("hasher", "blocks_run", "tokens_run", "hitting")

    def __init__(self, kind, block_tokens, name_blocks):
        self.hasher = BlockHasher(kind, block_tokens, None if name_blocks else 0)
        self.blocks_run = 0   # whole blocks run so far
        self.tokens_run = 0   # tokens run so far (the blocks', then the tail's)
        self.hitting = True   # no block of it has missed yet

    def run(self, cache, complete):
        block_tokens = self.hasher.block_tokens
        whole = self.hasher.tokens // block_tokens
        prefilled = 0
        if whole > self.blocks_run:
            tokens = (whole - self.blocks_run) * block_tokens
            hit = 0
            if cache is not None:
                hit = cache.run(self.hasher.hashes[self.blocks_run:whole], self)
            prefilled += tokens - hit
            self.blocks_run = whole
            self.tokens_run = whole * block_tokens
        if complete and self.hasher.tokens > self.tokens_run:
            tail = self.hasher.tokens - self.tokens_run
            if cache is not None:
                cache.miss_tokens += tail
            prefilled += tail
            self.tokens_run = self.hasher.tokens
        return prefilled


class RequestPrefill:
    """What one request's input costs to prefill, counted as it arrives: its
    text and its token ids, each kind its own input."""

    __slots__ = ("_text", "_tokens")

    def __init__(self, block_tokens, name_blocks):
        self._text = _KindInput("text", block_tokens, name_blocks)
        self._tokens = _KindInput("tokens", block_tokens, name_blocks)

    def append(self, payload):
        if isinstance(payload, str):
            self._text.hasher.append(payload)
        elif isinstance(payload, list):
            self._tokens.hasher.append(payload)

    def run(self, cache, complete):
        """Runs the input that arrived since the previous call through `cache`
        (None: no cache); returns the tokens to prefill (not found cached)."""
        return self._text.run(cache, complete) + self._tokens.run(cache, complete)


class PrefixCache:
    """A set of block names, at most `capacity_blocks` (>= 1), least recently
    used evicted first."""

    def __init__(self, capacity_blocks, block_tokens):
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self.hit_tokens = 0
        self.miss_tokens = 0
        self._blocks = collections.OrderedDict()  # least recently used first
        self._changes = []

    def run(self, blocks, state):
        """Runs `blocks`, the next whole blocks of one input whose `hitting`
        is in `state`; returns the tokens found cached."""
        hits = 0
        for block in blocks:
            if not state.hitting:
                break
            if block in self._blocks:
                hits += 1
            else:
                state.hitting = False
        for block in reversed(blocks):
            self._touch(block)
        hit_tokens = hits * self.block_tokens
        self.hit_tokens += hit_tokens
        self.miss_tokens += len(blocks) * self.block_tokens - hit_tokens
        return hit_tokens

    def holds(self, block):
        return block in self._blocks

    def stats(self):
        """(blocks held, hit tokens, miss tokens) since the engine started."""
        return len(self._blocks), self.hit_tokens, self.miss_tokens

    def take_changes(self):
        """[(block, stored)] since the previous call, oldest first."""
        changes, self._changes = self._changes, []
        return changes

    def _touch(self, block):
        if block in self._blocks:
            self._blocks.move_to_end(block)
            return
        if len(self._blocks) >= self.capacity_blocks:
            evicted, _ = self._blocks.popitem(last=False)
            self._changes.append((evicted, False))
        self._blocks[block] = None
        self._changes.append((block, True))
