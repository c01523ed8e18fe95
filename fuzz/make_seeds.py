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


def pipeline(replicas=(1, 1, 1), streaming=(True, True, True), idle=2, identities=False):
    """Stages text -> tokens -> audio (as many as `replicas` has); idle: 0 none,
    1 500 ms, 2 30 s. With identities, every gen() and abort() names its caller."""
    out = [len(replicas) - 1 + (3 if identities else 0)]
    for r, s in zip(replicas, streaming):
        out += [r - 1, 1 if s else 0]
    return out + [idle]


ANYONE, ALICE, BOB = 0, 2, 3  # Callers (pipelines with identities only).


def gen(rid=0, modality=0, prompt=True, caller=None):
    """rid 0..5: "r<rid>"; 6: generated; 7: "bad id". modality 0: all."""
    return [GEN, rid, 1 if prompt else 0, modality] + ([] if caller is None else [caller])


def out(stage, rid, *outputs, replica=None):
    """Outputs of `stage` on the replica `rid` is bound to (or `replica`);
    each output is (id index, payload, finished reason or None)."""
    program = [OUT, stage, rid, 1 if replica is None else 0, replica or 0, len(outputs) - 1]
    for i, (oid, payload, reason) in enumerate(outputs):
        if i > 0:
            program.append(oid)
        program += [payload, 0 if reason is None else 1] + ([] if reason is None else [reason])
    return program


def abort(*ids, past=False, ms=100, caller=None):
    return ([ABORT, len(ids) - 1, *ids, 0 if past else 1, ms & 0xFF, ms >> 8]
            + ([] if caller is None else [caller]))


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
    "seed_owners_abort_their_own": (
        "alice's r0 and bob's r1: bob's Abort of both stops only r1 (r0 is not found), "
        "alice's then stops r0.",
        pipeline(replicas=(1,), identities=True) + gen(0, caller=ALICE) + gen(1, caller=BOB)
        + out(0, 0, (0, TEXT, None)) + abort(0, 1, caller=BOB) + complete(0)
        + abort(0, caller=ALICE) + complete(0)),
    # Found by this target: the drain's abort of every request kept only the
    # unauthenticated clients' ones.
    "regression_drain_stops_every_owner": (
        "A drain while alice's and bob's requests run: both are stopped.",
        pipeline(replicas=(1,), identities=True) + gen(0, caller=ALICE) + gen(1, caller=BOB)
        + out(0, 0, (0, TEXT, None)) + [OTHER, 1, 1] + complete(0) + [CLOCK, MS[2000]]),
    "seed_admission_refusals": (
        "Refused before starting: a bad id, no prompt, a modality no stage makes, a duplicate "
        "id, and more than max_in_flight.",
        pipeline(replicas=(1,)) + gen(7) + gen(0, prompt=False) + gen(0, modality=2) + gen(0)
        + gen(0) + gen(1) + gen(2) + gen(3) + gen(4) + gen(5) + gen(6) + [OTHER, 3, 1]),
}

# ---- fuzz/worker_fuzzer.cc ---------------------------------------------------------

OPEN, ADD, APPEND, OTHER_CMD, WABORT, CLOSE, READ, DRAIN = 0, 1, 3, 4, 5, 6, 7, 9
ID_A, ID_B, ID_C, ID_D, ID_EMPTY, ID_LONG = 0, 1, 2, 3, 6, 7
NONE, P_TEXT, P_TOKENS, P_AUDIO = 0, 1, 2, 3


def setup(batch=2, max_tokens=3, text=False, fail_at=None, start_after=None):
    """start_after: the busy loop starts after this many operations (at once
    when None)."""
    return [batch - 1, max_tokens - 1, 1 if text else 0, 0 if fail_at else 1,
            (fail_at or 1) - 1, 1 if start_after is None else 0, start_after or 0]


def open_session(slow=False, peer=1, version_ok=True, stage=None, defaults=0):
    """defaults 0: none, 1: max_tokens, 2: an extra key the engine refuses."""
    return [OPEN, 1 if version_ok else 0, 1 if stage is None else 0, stage or 0, defaults,
            0 if slow else 1, peer, 1]


def add(session, rid, payload=P_TEXT, complete=True, max_tokens=2, stale=False, bad_extra=False):
    return [ADD, session, 0 if stale else 1, rid, payload, 1 if complete else 0, max_tokens,
            0 if bad_extra else 1]


def append(session, rid, payload=P_TEXT, last=True, stale=False):
    return [APPEND, session, 0 if stale else 1, rid, payload, 1 if last else 0]


def other(session, kind, name=0, divisor=1, stale=False):
    """kind 0: utility (name 0 ping, 1 stats, 2 div, 3 unknown), 1: DrainAck,
    2: a second Hello, 3: an empty command."""
    return [OTHER_CMD, session, 0 if stale else 1, kind, name, divisor]


def wabort(session, *ids, who=3, right_peer=True, fence=2):
    """who 0: the session number alone, 1: a wrong secret, 2: no such session,
    3: the session's id. fence 0: after seq 0, 1: after the next command, 2:
    after the last."""
    return [WABORT, session, who, 1 if right_peer else 0, fence, len(ids), *ids]


WORKER_SEEDS = {
    "seed_requests_end_once": (
        "Text and token requests, one streamed in two chunks, a utility call, an Abort.",
        setup() + open_session() + add(0, ID_A) + other(0, 0) + add(0, ID_B, P_TOKENS, False)
        + append(0, ID_B, last=False) + append(0, ID_B) + add(0, ID_C, max_tokens=3)
        + wabort(0, ID_C) + other(0, 0, name=2, divisor=0)),
    "seed_refusals": (
        "Commands the worker must refuse: a stale seq, bad ids, audio input, a bad parameter, "
        "an extra key, a second Hello, an empty command; then a good one.",
        setup() + open_session() + add(0, ID_A, stale=True) + add(0, ID_EMPTY)
        + add(0, ID_LONG) + add(0, ID_A, P_AUDIO) + add(0, ID_A, max_tokens=4)
        + add(0, ID_A, bad_extra=True) + other(0, 2) + other(0, 3) + append(0, ID_EMPTY)
        + add(0, ID_A)),
    "seed_slow_reader_then_gone": (
        "A reader that reads one event now and then, then breaks its stream with requests live.",
        setup(batch=1) + open_session(slow=True) + add(0, ID_A) + add(0, ID_B, max_tokens=3)
        + [READ, 0] + [READ, 0] + add(0, ID_C, P_TOKENS, False) + [CLOSE, 0]),
    "seed_abort_who_may": (
        "Aborts naming a session by its number, a wrong secret, an unknown id, from another "
        "peer, fenced after a command not yet sent; then the owner's.",
        setup() + open_session(peer=1) + add(0, ID_A, complete=False)
        + wabort(0, ID_A, who=0) + wabort(0, ID_A, who=1) + wabort(0, ID_A, who=2)
        + wabort(0, ID_A, right_peer=False) + wabort(0, ID_A, fence=1) + add(0, ID_B)
        + wabort(0, ID_A, ID_A, ID_EMPTY) + wabort(0, ID_A)),
    "seed_fatal_step": (
        "The engine fails at step 2 with requests live on two sessions.",
        setup(fail_at=2) + open_session() + open_session(peer=2) + add(0, ID_A)
        + add(1, ID_A) + add(0, ID_B) + other(1, 0, name=1)),
    "seed_drain": (
        "A drain with a request waiting for input and one running; the client acknowledges.",
        setup() + open_session() + add(0, ID_A, complete=False) + add(0, ID_B)
        + [DRAIN, 0] + other(0, 1) + add(0, ID_C)),
    # Found by this target: the Abort ended the Add queued after it.
    "regression_abort_before_add_of_its_id": (
        "An Abort of 'a' reaches the loop before the Add of 'a' that was sent after it: the "
        "request is not stopped and must end once, when it finishes.",
        setup(max_tokens=1, start_after=3) + open_session() + wabort(0, ID_A, fence=0)
        + add(0, ID_A, max_tokens=1)),
    "seed_hello_refused": (
        "Hellos the worker refuses: a newer protocol, another stage, defaults its engine "
        "refuses; then one it takes.",
        setup() + open_session(version_ok=False) + open_session(stage=1)
        + open_session(defaults=2) + open_session(defaults=1) + add(0, ID_D, max_tokens=0)),
}


def write(target, seeds):
    folder = os.path.join(ROOT, target)
    os.makedirs(folder, exist_ok=True)
    for name, (_, program) in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(bytes(program))


if __name__ == "__main__":
    write("pipeline_core_fuzzer", CORE_SEEDS)
    write("worker_fuzzer", WORKER_SEEDS)
