#!/usr/bin/env python3
"""Writes the hand-written seeds of the two stateful fuzz targets.

    fuzz/make_seeds.py          # rewrites the files named below

Each seed is a short program in the operation encoding the target decodes
(one byte per choice, see fuzz/fuzz_input.h and the Step() of each target):
this file is that encoding written down once, with a name and a sentence for
every scenario. It rewrites its own files only: inputs kept as fuzzing found
them stay as they are.
"""

import os

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# ---- fuzz/pipeline_core_fuzzer.cc ---------------------------------------------------

GEN, OUT, CANCEL, ABORT, DOWN, READY, TROUBLE, REJECT, COMPLETE = 0, 2, 4, 5, 6, 7, 8, 9, 10
CLOCK, OTHER = 12, 13
TEXT, TOKENS, AUDIO = 1, 2, 3  # Payloads of outputs.
STOP, LENGTH, ABORTED, ERROR = 0, 1, 2, 3  # Finish reasons.
MS = {1: 0, 10: 1, 50: 2, 100: 3, 400: 4, 1000: 5, 2000: 6, 30000: 7}


def pipeline(replicas=(1, 1, 1), streaming=(True, True, True), idle=2):
    """Stages text -> tokens -> audio (as many as `replicas` has); idle: 0 none,
    1 500 ms, 2 30 s."""
    out = [len(replicas) - 1]
    for r, s in zip(replicas, streaming):
        out += [r - 1, 1 if s else 0]
    return out + [idle]


def gen(rid=0, modality=0, prompt=True):
    """rid 0..5: "r<rid>"; 6: generated; 7: "bad id". modality 0: all."""
    return [GEN, rid, 1 if prompt else 0, modality]


def out(stage, rid, *outputs, replica=None):
    """Outputs of `stage` on the replica `rid` is bound to (or `replica`);
    each output is (id index, payload, finished reason or None)."""
    program = [OUT, stage, rid, 1 if replica is None else 0, replica or 0, len(outputs) - 1]
    for i, (oid, payload, reason) in enumerate(outputs):
        if i > 0:
            program.append(oid)
        program += [payload, 0 if reason is None else 1] + ([] if reason is None else [reason])
    return program


def abort(*ids, past=False, ms=100):
    return [ABORT, len(ids) - 1, *ids, 0 if past else 1, ms & 0xFF, ms >> 8]


def complete(stage, replica=0, ok=True, failure=0):
    return [COMPLETE, stage, replica, 1 if ok else 0, failure]


CORE_SEEDS = {
    "seed_streamed_to_the_end": (
        "r0 streams text, codes and audio and finishes on every stage.",
        pipeline() + gen(0) + out(0, 0, (0, TEXT, None)) + out(0, 0, (0, TEXT, STOP))
        + out(1, 0, (0, TOKENS, None)) + out(2, 0, (0, AUDIO, None))
        + out(1, 0, (0, TOKENS, LENGTH)) + out(2, 0, (0, AUDIO, STOP))),
    "seed_client_abort_confirmed": (
        "r0 and r1 run; one Abort of both (and an unknown id) is confirmed stage by stage.",
        pipeline(replicas=(2, 1, 1)) + gen(0) + gen(1) + out(0, 0, (0, TEXT, None), (1, TEXT, None))
        + abort(0, 1, 2) + complete(0, 0) + complete(0, 1) + complete(1) + complete(2)),
    "seed_abort_fails_then_retried": (
        "An Abort fails on stage 0 (outputs held meanwhile are replayed), a second one succeeds.",
        pipeline() + gen(0) + abort(0) + out(0, 0, (0, TEXT, None))
        + complete(0, ok=False, failure=1) + abort(0) + complete(0) + complete(1) + complete(2)),
    # Found by this target: StagePool released the new r0's binding.
    "regression_abort_answer_after_reconnect": (
        "r0's replica dies while an Abort of r0 waits; it comes back as a new incarnation, "
        "r0 is sent again and lands there; then the old Abort answers.",
        pipeline(replicas=(1,)) + gen(0) + abort(0) + [READY, 0, 0, 1] + gen(0)
        + complete(0) + out(0, 0, (0, TEXT, STOP))),
    "seed_cancel_retried_with_backoff": (
        "The client of r0 goes away; the stop fails twice, backs off and is retried.",
        pipeline() + gen(0) + [CANCEL, 0, 1, 0] + complete(0, ok=False) + [CLOCK, MS[100]]
        + complete(0, ok=False) + [CLOCK, MS[400]] + complete(0)),
    "seed_worker_rejects_and_stalls": (
        "Stage 1 rejects r0's Add; r1's replica stalls; r2's fails with an ERROR output.",
        pipeline(replicas=(2, 1, 1)) + gen(0) + gen(1) + gen(2)
        + out(0, 0, (0, TEXT, STOP)) + [REJECT, 1, 0, 0, 1, 0]
        + [TROUBLE, 0, 1, 1, 5] + out(0, 2, (2, TEXT, ERROR))),
    "seed_drain_with_stuck_abort": (
        "A drain whose aborts never answer: the worker deadline fails them, requests end with "
        "an error.",
        pipeline(replicas=(1, 1)) + gen(0) + gen(1) + out(0, 0, (0, TEXT, None))
        + [OTHER, 1, 1] + [CLOCK, MS[400]] + [CLOCK, MS[400]] + [CLOCK, MS[2000]]
        + [CLOCK, MS[2000]]),
    "seed_idle_timeout_and_sends_failing": (
        "Sends to stage 1 fail as the session closes; r1 produces nothing and times out.",
        pipeline(idle=1) + [OTHER, 0, 1, 0, 1] + gen(0) + out(0, 0, (0, TEXT, STOP)) + gen(1)
        + [CLOCK, MS[400]] + [CLOCK, MS[400]] + [OTHER, 2]),
    "seed_admission_refusals": (
        "Refused before starting: a bad id, no prompt, a modality no stage makes, a duplicate "
        "id, and more than max_in_flight.",
        pipeline(replicas=(1,)) + gen(7) + gen(0, prompt=False) + gen(0, modality=2) + gen(0)
        + gen(0) + gen(1) + gen(2) + gen(3) + gen(4) + gen(5) + gen(6) + [OTHER, 3, 1]),
}

def write(target, seeds):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for name, (_, program) in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(program))


if __name__ == "__main__":
    write("pipeline_core_fuzzer", CORE_SEEDS)
