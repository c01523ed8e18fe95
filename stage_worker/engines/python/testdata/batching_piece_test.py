#!/usr/bin/python3
"""omnistage_engines.batching's later pieces sized by load, as the C++
BatchingEngine does them (stage_worker/engines/base/batching_engine_piece_test.cc):
a request whose first output is out and whose input still streams steps only
every `later_piece_steps` steps at a full batch, fewer apart with fewer
running, and produces what it would have.

Run by //stage_worker/engines/python:batching_piece_test, or by hand from the
repository root."""

import sys
import unittest

sys.path.insert(0, "stage_worker/engines/python")

from omnistage_engines.batching import Batching, Generator  # noqa: E402
from omnistage_engines.params import ParamError  # noqa: E402


class _EchoGenerator(Generator):
    """Echoes its text input one character a step as it arrives; stops at the
    end of its complete input."""

    def __init__(self):
        self.sent = 0

    def ready(self, inp):
        return self.sent < len(inp.text) or inp.complete

    def step(self, inp):
        if self.sent < len(inp.text):
            self.sent += 1
            return [inp.text[self.sent - 1]], "stop" if (
                inp.complete and self.sent == len(inp.text)) else None
        return [], "stop"


class Echo(Batching):
    ACCEPTS = ("text",)

    def __init__(self, params):
        super().__init__("echo", params)

    def new_generator(self, max_tokens, seed, extra):
        return _EchoGenerator()


def params(extra=None):
    return {"max_tokens": 100, "seed": None, "temperature": None,
            "extra": extra or {}, "produced": []}


def output_steps(engine, request_id, steps):
    """The steps (1-based) in which `request_id` produced output, its input
    streaming one character before each step."""
    at = []
    for step in range(1, steps + 1):
        engine.append_input(request_id, ["x"], False)
        if any(out[0] == request_id and out[1] for out in engine.step()):
            at.append(step)
    return at


class LaterPieceTest(unittest.TestCase):
    def test_reads_later_piece_steps(self):
        self.assertEqual(Echo({"later_piece_steps": "4"}).later_piece_steps, 4)
        self.assertEqual(Echo({}).later_piece_steps, 1)
        with self.assertRaises(ParamError):
            Echo({"later_piece_steps": "0"})

    def test_at_a_full_batch_later_pieces_come_that_many_steps_apart(self):
        engine = Echo({"batch_size": "1", "later_piece_steps": "4"})
        engine.add("r", [], False, params())
        self.assertEqual(output_steps(engine, "r", 12), [1, 5, 9])
        self.assertEqual(engine.utility("stats", [])["piece_waits"], 9)

    def test_fewer_running_means_pieces_closer_together(self):
        engine = Echo({"batch_size": "2", "later_piece_steps": "4"})
        engine.add("r", [], False, params())
        self.assertEqual(output_steps(engine, "r", 10), [1, 4, 7, 10])
        light = Echo({"batch_size": "64", "later_piece_steps": "4"})
        light.add("r", [], False, params())
        self.assertEqual(output_steps(light, "r", 4), [1, 2, 3, 4])

    def test_the_end_does_not_wait_and_the_output_is_the_same(self):
        engine = Echo({"batch_size": "1", "later_piece_steps": "4"})
        engine.add("r", ["ab"], False, params())
        text = "".join("".join(out[1]) for out in engine.step())
        engine.append_input("r", ["cd"], True)
        steps = 0
        while engine.has_work():
            steps += 1
            text += "".join("".join(out[1]) for out in engine.step())
        self.assertEqual(text, "abcd")
        self.assertEqual(steps, 3)
        self.assertEqual(engine.utility("stats", [])["piece_waits"], 0)

    def test_a_request_sets_its_own(self):
        engine = Echo({"batch_size": "1", "later_piece_steps": "4"})
        engine.add("r", [], False, params({"later_piece_steps": "1"}))
        self.assertEqual(output_steps(engine, "r", 4), [1, 2, 3, 4])
        with self.assertRaises(ValueError) as refused:
            engine.validate("bad", [], False, params({"later_piece_steps": "0"}))
        self.assertIn("later_piece_steps", str(refused.exception))
        self.assertEqual(refused.exception.field, "params.extra.later_piece_steps")
        with self.assertRaises(ValueError) as unknown:
            engine.validate("bad", [], False, params({"colour": "red"}))
        self.assertIn("unknown extra parameter 'colour' (known: later_piece_steps)",
                      str(unknown.exception))


if __name__ == "__main__":
    unittest.main()
