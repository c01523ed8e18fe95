#!/usr/bin/python3
"""omnistage_engines.batching by playback deadline, as the C++ BatchingEngine
does it (stage_worker/engines/base/batching_engine_deadline_test.cc): who gets
a free slot first, and who sits out a step (`playback_lead_ms`).

Run by //stage_worker/engines/python:batching_deadline_test, or by hand from
the repository root."""

import sys
import unittest

sys.path.insert(0, "stage_worker/engines/python")

from omnistage_engines.params import ParamError  # noqa: E402
from omnistage_engines.sim_llm import SimLlm  # noqa: E402


def params(max_tokens):
    return {"max_tokens": max_tokens, "seed": None, "temperature": None,
            "extra": {}, "produced": []}


def ids(outputs):
    return [output[0] for output in outputs]


class PlaybackDeadlineTest(unittest.TestCase):
    def test_reads_the_lead(self):
        self.assertEqual(SimLlm({"playback_lead_ms": "1500"}).playback_lead, 1.5)
        self.assertEqual(SimLlm({}).playback_lead, 0)
        with self.assertRaises(ParamError):
            SimLlm({"playback_lead_ms": "-1"})

    def test_a_free_slot_goes_to_the_soonest_deadline(self):
        engine = SimLlm({"batch_size": "1"})
        for request_id in ("first", "ahead", "behind", "silent"):
            engine.add(request_id, ["x"], True, params(1))
        engine.set_playback_deadline("ahead", 10)
        engine.set_playback_deadline("behind", 1)
        engine.set_playback_deadline("nobody", 0)  # unknown: ignored
        self.assertEqual(ids(engine.step()), ["first"])
        self.assertEqual(ids(engine.step()), ["silent"])
        self.assertEqual(ids(engine.step()), ["behind"])
        self.assertEqual(ids(engine.step()), ["ahead"])
        self.assertFalse(engine.has_work())

    def test_without_deadlines_slots_go_in_arrival_order(self):
        engine = SimLlm({"batch_size": "1"})
        for request_id in ("a", "b", "c"):
            engine.add(request_id, ["x"], True, params(1))
        self.assertEqual([ids(engine.step()) for _ in range(3)], [["a"], ["b"], ["c"]])

    def test_a_request_ahead_sits_out_while_another_is_close(self):
        engine = SimLlm({"batch_size": "4", "playback_lead_ms": "2000"})
        engine.add("ahead", ["x"], True, params(3))
        engine.add("new", ["x"], True, params(2))
        engine.set_playback_deadline("ahead", 60)
        self.assertEqual(ids(engine.step()), ["new"])
        self.assertEqual(ids(engine.step()), ["new"])  # finishes
        self.assertEqual(engine.utility("stats", [])["sat_out"], 2)
        tokens = []
        while engine.has_work():
            for request_id, payloads, _ in engine.step():
                self.assertEqual(request_id, "ahead")
                for payload in payloads:
                    tokens.extend(payload)
        self.assertEqual(len(tokens), 3)
        self.assertEqual(engine.utility("stats", [])["sat_out"], 2)

    def test_within_the_lead_a_request_steps(self):
        engine = SimLlm({"batch_size": "4", "playback_lead_ms": "2000"})
        engine.add("close", ["x"], True, params(2))
        engine.add("new", ["x"], True, params(2))
        engine.set_playback_deadline("close", 1)
        self.assertEqual(sorted(ids(engine.step())), ["close", "new"])

    def test_without_a_lead_every_ready_request_steps(self):
        engine = SimLlm({"batch_size": "4"})
        engine.add("ahead", ["x"], True, params(2))
        engine.add("new", ["x"], True, params(2))
        engine.set_playback_deadline("ahead", 60)
        self.assertEqual(sorted(ids(engine.step())), ["ahead", "new"])
        self.assertEqual(engine.utility("stats", [])["sat_out"], 0)


if __name__ == "__main__":
    unittest.main()
