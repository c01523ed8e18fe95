"""sim_llm in Python: the C++ sim_llm engine (stage_worker/engines/models/sim_llm.h)
token for token. Each step emits one token per running request, drawn from
splitmix64 seeded by a hash of the whole input and the request's seed; it
finishes with "length" after max_tokens tokens. It starts once the input is
complete, like an LLM that prefills the whole prompt.

Parameters: those of batching.Batching, `vocab_size` (default 32000) and
`output` ("tokens", default, or "text": a word per token).

  engine: python
  engine_params: {path: stage_worker/engines/python,
                  module: omnistage_engines.sim_llm, class: SimLlm, batch_size: "64"}
"""

from omnistage_engines.batching import Batching, Generator
from omnistage_engines.words import ALL_WORDS

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(x):
    x = (x + GOLDEN) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def hash_combine(h, value):
    return mix64(h ^ mix64(value))


def hash_bytes(data):
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & MASK
    return mix64(h)


def hash_tokens(tokens):
    h = mix64(len(tokens))
    for t in tokens:
        h = hash_combine(h, t & 0xFFFFFFFF)
    return h


class _SimLlmGenerator(Generator):
    __slots__ = ("vocab", "text", "max_tokens", "seed", "state", "produced")

    def __init__(self, vocab, text, max_tokens, seed):
        self.vocab = vocab
        self.text = text
        self.max_tokens = max_tokens
        self.seed = seed
        self.state = None  # seeded at the first step, from the full input
        self.produced = 0

    def ready(self, inp):
        return inp.complete

    def step(self, inp):
        if self.state is None:
            self.state = hash_combine(
                hash_combine(hash_bytes(inp.text.encode()), hash_tokens(inp.tokens)), self.seed)
        self.state = (self.state + GOLDEN) & MASK  # splitmix64's next()
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        token = (z ^ (z >> 31)) % self.vocab
        if self.text:
            word = ALL_WORDS[token % len(ALL_WORDS)]
            payload = word if self.produced == 0 else " " + word
        else:
            payload = [token]
        self.produced += 1
        return [payload], ("length" if self.produced >= self.max_tokens else None)


class SimLlm(Batching):
    ACCEPTS = ("text", "tokens")
    # A request's tokens depend on its whole input and seed only (not on its
    # batch, its input's chunks or timing), so a lost request runs again on
    # another replica and produces them again (docs/engines.md#failover).
    resume = "replay"

    def __init__(self, params):
        def read_own(reader):
            self.vocab_size = reader.int("vocab_size", 32000, 1, 1 << 30)
            self.text_output = reader.enum("output", "tokens", ["tokens", "text"]) == "text"

        super().__init__("sim_llm", params, read_own)

    def new_generator(self, max_tokens, seed, extra):
        return _SimLlmGenerator(self.vocab_size, self.text_output, max_tokens, seed)
