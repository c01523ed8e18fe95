#!/usr/bin/python3
"""omnistage_engines.prefix_cache: block names as common/prefix_blocks.cc makes
them (the values pinned in common/prefix_blocks_test.cc), in any chunking; the
hit rule, LRU eviction and change log; and the cache and prefill time in
batching.Batching (through SimLlm), with its parameters' refusals.

Run by //stage_worker/engines/python:prefix_cache_test, or by hand from the
repository root (Bazel runs tests from the workspace root of the runfiles)."""

import sys
import unittest

sys.path.insert(0, "stage_worker/engines/python")

from omnistage_engines import batching  # noqa: E402
from omnistage_engines.params import ParamError  # noqa: E402
from omnistage_engines.prefix_cache import (  # noqa: E402
    BlockHasher, PrefixCache, RequestPrefill, chain_block_hash, text_block_hashes,
    token_block_hashes)
from omnistage_engines.sim_llm import SimLlm  # noqa: E402


def prompt(size):
    """`size` bytes of ASCII words, as prefix_blocks_test.cc's Prompt()."""
    text = ""
    i = 0
    while len(text) < size:
        text += f"word{i} "
        i += 1
    return text[:size]


def params(**values):
    return {"max_tokens": None, "seed": None, "temperature": None,
            "extra": {}, "produced": [], **values}


class BlockNamesTest(unittest.TestCase):
    def test_names_are_pinned(self):
        # The same values as PrefixBlocksTest.NamesArePinned.
        self.assertEqual(chain_block_hash(1, b"a"), 8035723705688925496)
        self.assertEqual(
            text_block_hashes("The quick brown fox jumps over the lazy dog, twice.", 4),
            [15896087689116713669, 2922689326145311753, 11623984927517038119])
        self.assertEqual(token_block_hashes([1, 2, 3, -1, 70000, 6], 3),
                         [15959705789133385612, 11035512868910068976])

    def test_only_whole_blocks_are_named(self):
        self.assertEqual(text_block_hashes(prompt(63), 16), [])
        self.assertEqual(len(text_block_hashes(prompt(64), 16)), 1)
        self.assertEqual(len(text_block_hashes(prompt(200), 16)), 3)
        self.assertEqual(len(token_block_hashes([7] * 47, 16)), 2)

    def test_a_hash_stands_for_its_whole_prefix(self):
        shared = prompt(640)
        a = text_block_hashes(shared + "one question", 16)
        b = text_block_hashes(shared + "another question", 16)
        self.assertEqual(len(a), 10)
        self.assertEqual(a, b[:10])
        changed = text_block_hashes("W" + shared[1:], 16)
        for x, y in zip(changed, a):
            self.assertNotEqual(x, y)

    def test_chunking_does_not_change_the_names(self):
        text = prompt(1000)
        whole = text_block_hashes(text, 16)
        for step in (1, 3, 63, 64, 65, 500):
            hasher = BlockHasher("text", 16)
            for at in range(0, len(text), step):
                hasher.append(text[at:at + step])
            self.assertEqual(hasher.hashes, whole, f"chunks of {step}")
            self.assertEqual(hasher.tokens, 250)
        tokens = list(range(-50, 950))
        whole = token_block_hashes(tokens, 16)
        for step in (1, 7, 16, 333):
            hasher = BlockHasher("tokens", 16)
            for at in range(0, len(tokens), step):
                hasher.append(tokens[at:at + step])
            self.assertEqual(hasher.hashes, whole, f"chunks of {step}")

    def test_text_is_its_utf8_bytes(self):
        # A character of two bytes may straddle a block: the bytes are what count.
        text = "é" * 40  # 80 bytes: 20 tokens
        self.assertEqual(text_block_hashes(text, 4), text_block_hashes(text.encode().decode(), 4))
        hasher = BlockHasher("text", 4)
        for char in text:
            hasher.append(char)
        self.assertEqual(hasher.hashes, text_block_hashes(text, 4))
        self.assertEqual(hasher.tokens, 20)
        self.assertEqual(len(hasher.hashes), 5)

    def test_text_and_tokens_are_named_apart(self):
        self.assertNotEqual(token_block_hashes([0x61616161] * 16, 16),
                            text_block_hashes("a" * 64, 16))

    def test_max_blocks_stops_naming_but_counts(self):
        hasher = BlockHasher("text", 1, max_blocks=3)
        hasher.append(prompt(40))
        self.assertEqual(hasher.hashes, text_block_hashes(prompt(12), 1))
        self.assertEqual(hasher.tokens, 10)


def run_text(cache, text, complete=True):
    """A request of `text` through `cache` (None: no cache); its prefill."""
    prefill = RequestPrefill(4 if cache is None else cache.block_tokens, cache is not None)
    prefill.append(text)
    return prefill, prefill.run(cache, complete)


class State:
    hitting = True


class PrefixCacheTest(unittest.TestCase):
    def test_leading_held_blocks_hit_and_the_rest_of_the_input_misses(self):
        cache = PrefixCache(100, 4)  # 16 bytes a block
        cache.run([1, 2, 3], State())
        self.assertEqual(cache.run([1, 2, 3], State()), 12)
        # From the first block it does not hold, a held block is a miss too,
        # in this run and the input's later runs.
        state = State()
        self.assertEqual(cache.run([1, 9, 3], state), 4)
        self.assertEqual(cache.run([2], state), 0)
        self.assertEqual(cache.stats(), (4, 16, 24))

    def test_a_request_hits_its_cached_prefix_and_prefills_the_rest(self):
        cache = PrefixCache(100, 4)
        shared = prompt(64)  # 4 blocks
        _, prefilled = run_text(cache, shared + prompt(40))  # 6 blocks, 1 token over
        self.assertEqual(prefilled, 26)
        self.assertEqual(cache.stats(), (6, 0, 26))
        _, prefilled = run_text(cache, shared + "x" * 30)  # 94 bytes: 23 tokens
        self.assertEqual(prefilled, 7)
        self.assertEqual(cache.stats(), (6 + 1, 16, 33))
        # A partial trailing block is a miss and not stored.
        _, prefilled = run_text(cache, shared + "z" * 15)
        self.assertEqual(prefilled, 3)
        self.assertEqual(cache.stats(), (7, 32, 36))

    def test_text_and_tokens_hit_each_on_their_own(self):
        cache = PrefixCache(100, 2)
        for text, expected in (("x" * 8, 6), ("y" * 8, 2)):
            prefill = RequestPrefill(2, True)
            prefill.append(text)
            prefill.append([1, 2, 3, 4])
            self.assertEqual(prefill.run(cache, True), expected)

    def test_a_streamed_input_prefills_its_whole_blocks_then_its_tail(self):
        cache = PrefixCache(100, 4)
        run_text(cache, prompt(64))
        prefill = RequestPrefill(4, True)
        prefill.append(prompt(40))  # 2 whole blocks and 8 bytes
        self.assertEqual(prefill.run(cache, False), 0)  # 8 hit tokens
        self.assertEqual(prefill.run(cache, False), 0)  # nothing new
        prefill.append(prompt(64)[40:] + "tail")  # 2 more blocks, 4 bytes over
        self.assertEqual(prefill.run(cache, True), 1)
        self.assertEqual(cache.stats(), (4, 16, 17))

    def test_least_recently_used_blocks_go_first_and_changes_say_so(self):
        cache = PrefixCache(3, 1)  # 4 bytes a block
        run_text(cache, "aaaabbbbcccc")
        a, b, c = text_block_hashes("aaaabbbbcccc", 1)
        # Stored deepest first: a is the most recently used, c the least.
        self.assertEqual(cache.take_changes(), [(c, True), (b, True), (a, True)])
        self.assertEqual(cache.take_changes(), [])
        run_text(cache, "aaaa")  # a touched: no change
        self.assertEqual(cache.take_changes(), [])
        run_text(cache, "dddd")
        d = text_block_hashes("dddd", 1)[0]
        self.assertEqual(cache.take_changes(), [(c, False), (d, True)])
        _, prefilled = run_text(cache, "aaaabbbb")  # the prefix stayed
        self.assertEqual(prefilled, 0)
        self.assertEqual(cache.take_changes(), [])
        self.assertEqual([cache.holds(x) for x in (a, b, c, d)], [True, True, False, True])
        self.assertEqual(cache.stats(), (3, 3, 4))

    def test_without_a_cache_every_token_is_prefilled(self):
        for _ in range(2):
            _, prefilled = run_text(None, prompt(642))
            self.assertEqual(prefilled, 160)


class FakeTime:
    """batching's clock: records the sleeps a step asks for."""

    def __init__(self):
        self.now = 0
        self.slept = []

    def monotonic_ns(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds * 1e6))


class BatchingCacheTest(unittest.TestCase):
    def setUp(self):
        self.clock = FakeTime()
        self.real_time = batching.time
        batching.time = self.clock

    def tearDown(self):
        batching.time = self.real_time

    def run_one(self, engine, request_id, text):
        engine.validate(request_id, [text], True, params())
        engine.add(request_id, [text], True, params(max_tokens=1))
        self.assertEqual(len(engine.step()), 1)

    def test_the_step_lasts_longer_by_its_uncached_tokens(self):
        engine = SimLlm({"prefix_cache_blocks": "8", "block_tokens": "4",
                         "prefill_us_per_token": "10", "step_time_us": "100"})
        self.assertEqual(engine.prefix_cache, (4, 8))
        self.run_one(engine, "a", prompt(100))  # 25 tokens, none cached
        self.run_one(engine, "b", prompt(100))  # 24 cached, the partial block not
        self.run_one(engine, "c", "other")      # 1 token
        self.assertEqual(self.clock.slept, [100 + 250, 100 + 10, 100 + 10])
        self.assertEqual(engine.prefix_cache_stats(), (6, 24, 27))
        stats = engine.utility("stats", [])
        self.assertEqual({k: v for k, v in stats.items() if k.startswith("prefix_cache")},
                         {"prefix_cache_blocks": 6, "prefix_cache_capacity_blocks": 8,
                          "prefix_cache_hit_tokens": 24, "prefix_cache_miss_tokens": 27})
        self.assertEqual(len(engine.take_cache_changes()), 6)
        self.assertEqual(engine.take_cache_changes(), [])

    def test_without_a_cache_every_input_token_is_prefilled(self):
        engine = SimLlm({"prefill_us_per_token": "2"})
        self.assertIsNone(engine.prefix_cache)
        self.assertNotIn("prefix_cache_blocks", engine.utility("stats", []))
        self.run_one(engine, "a", prompt(100))
        self.run_one(engine, "b", prompt(100))
        self.assertEqual(self.clock.slept, [50, 50])

    def test_parameters_are_checked(self):
        self.assertIsNone(SimLlm({}).prefix_cache)
        self.assertEqual(SimLlm({"prefix_cache_blocks": "1"}).prefix_cache, (16, 1))
        for key, value, expected in (
                ("prefix_cache_blocks", "-1", "an integer in [0, 1048576]"),
                ("block_tokens", "0", "an integer in [1, 4096]"),
                ("block_tokens", "4097", "an integer in [1, 4096]"),
                ("prefill_us_per_token", "1.5", "a duration in [0, 1000000] microseconds")):
            with self.assertRaises(ParamError) as raised:
                SimLlm({key: value})
            self.assertEqual(raised.exception.param, key)
            self.assertEqual(str(raised.exception),
                             f"engine sim_llm: parameter {key}: expected {expected}, "
                             f"got '{value}'")


if __name__ == "__main__":
    unittest.main()
