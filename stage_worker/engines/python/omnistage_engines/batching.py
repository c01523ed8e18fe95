"""Continuous batching for Python engines, as the C++ BatchingEngine does it
(stage_worker/engines/base/batching_engine.h), so an engine only says what one
request produces in one step.

- At most `batch_size` requests run; the others wait in FIFO order and are
  admitted at the start of a step when a slot is free and their generator is
  ready (a request waiting for streamed input holds no slot).
- Streamed text and token input is concatenated per kind in arrival order.
- Modelled step time (`step_time_us`, `step_mode` sleep or busy) and the
  utilities "ping" and "stats". (The worker's fault and benchmark hooks,
  `fail_at_step`, `stamp_outputs` and the rest, wrap any engine from outside:
  the engine never sees those parameters; docs/engines.md.)
- A simulated prefix cache, off by default (`prefix_cache_blocks`,
  `block_tokens`), and modelled prefill (`prefill_us_per_token`): each step,
  the running requests' new input goes through the cache (prefix_cache.py, in
  admission order), and the step takes step_time_us plus
  prefill_us_per_token for every token the cache did not hold. Only the
  timing and the cache's figures change: a generator never sees the cache.
- `step_us_per_request`: added to a step's time for each request it runs (a
  forward pass that grows with its batch).
- Playback deadlines (`set_playback_deadline`, the seconds until a request's
  listener runs out of audio): a free slot goes to the soonest deadline first
  (one not playing yet, the soonest of all; FIFO among equals). With
  `playback_lead_ms`, a running request whose listener has more audio in hand
  than that sits out a step while a request with less is ready.
- Later pieces sized by load (`later_piece_steps`, and a request's extra
  parameter of that name): at a full batch, a request whose first output is
  out and whose input still streams steps once every that many steps (1 + (n
  - 1) x running / batch_size apart, rounded half away from zero).
- Streamed input that breaks the contract (a kind the engine does not take,
  input after `last`) fails only that request, with an "error" output.

The worker calls every method on its busy-loop thread only.
"""

import collections
import time

from omnistage_engines.params import ParamError, Params
from omnistage_engines.prefix_cache import (DEFAULT_BLOCK_TOKENS, MAX_BLOCK_TOKENS, PrefixCache,
                                            RequestPrefill)

MAX_BATCH_SIZE = 65536
MAX_TOKENS_LIMIT = 1000000
MAX_PREFIX_CACHE_BLOCKS = 1 << 20
MAX_STEP_US_PER_REQUEST = 1000000
MAX_PREFILL_US_PER_TOKEN = 1000000
MAX_PLAYBACK_LEAD_MS = 3600 * 1000
MAX_LATER_PIECE_STEPS = 1000


class Input:
    """All input a request has received so far."""

    __slots__ = ("text", "tokens", "complete")

    def __init__(self):
        self.text = ""
        self.tokens = []
        self.complete = False


class Generator:
    """The engine-specific work of one request."""

    def ready(self, inp):
        """Whether step() can make progress with `inp`."""
        raise NotImplementedError

    def step(self, inp):
        """One step: (payloads, finish), finish None while it goes on."""
        raise NotImplementedError


class _Live:
    __slots__ = ("id", "input", "prefill", "generator", "running", "runs_out",
                 "later_piece_steps", "last_step", "produced")

    def __init__(self, request_id, prefill, generator, later_piece_steps=1):
        self.id = request_id
        self.input = Input()
        self.prefill = prefill  # a RequestPrefill when the engine prefills, else None
        self.generator = generator
        self.running = False
        # time.monotonic_ns() / 1e9 when its listener runs out of audio; None: not
        # playing yet (sooner than any).
        self.runs_out = None
        # Its later_piece_steps, the step it last stepped in, and whether it
        # has produced output (its first piece is out).
        self.later_piece_steps = later_piece_steps
        self.last_step = 0
        self.produced = False


def _soonest(live):
    """Sort key: the soonest deadline first, one not playing before all."""
    return (0, 0) if live.runs_out is None else (1, live.runs_out)


def _kind(payload):
    if isinstance(payload, str):
        return "text"
    if isinstance(payload, list):
        return "tokens"
    if isinstance(payload, bytes):
        return "raw"
    return "audio"


class Batching:
    """Subclasses set ACCEPTS (input kinds) and implement new_generator()."""

    ACCEPTS = ("text", "tokens")

    def __init__(self, name, params, read_own=None):
        self.name = name
        reader = Params(name, params)
        self.batch_size = reader.int("batch_size", 16, 1, MAX_BATCH_SIZE)
        self.step_us = reader.micros("step_time_us", 0, 60 * 1000000)
        self.busy = reader.enum("step_mode", "sleep", ["sleep", "busy"]) == "busy"
        self.default_max_tokens = reader.int("max_tokens", 32, 1, MAX_TOKENS_LIMIT)
        cache_blocks = reader.int("prefix_cache_blocks", 0, 0, MAX_PREFIX_CACHE_BLOCKS)
        self.block_tokens = reader.int("block_tokens", DEFAULT_BLOCK_TOKENS, 1, MAX_BLOCK_TOKENS)
        self.prefill_us_per_token = reader.micros("prefill_us_per_token", 0,
                                                  MAX_PREFILL_US_PER_TOKEN)
        self.step_us_per_request = reader.micros("step_us_per_request", 0,
                                                 MAX_STEP_US_PER_REQUEST)
        self.playback_lead = reader.int("playback_lead_ms", 0, 0, MAX_PLAYBACK_LEAD_MS) / 1000
        self.later_piece_steps = reader.int("later_piece_steps", 1, 1, MAX_LATER_PIECE_STEPS)
        if read_own is not None:
            read_own(reader)
        reader.finish()
        self._cache = PrefixCache(cache_blocks, self.block_tokens) if cache_blocks else None
        self._prefills = self._cache is not None or self.prefill_us_per_token > 0
        self._requests = {}
        self._waiting = collections.deque()
        self._running = []
        self._failed = []
        self._steps = 0
        self._abort_calls = 0
        self._sat_out = 0
        self._piece_waits = 0

    # The engine interface -------------------------------------------------

    @property
    def capacity(self):
        return self.batch_size

    @property
    def prefix_cache(self):
        """(block_tokens, capacity_blocks), or None without a cache."""
        if self._cache is None:
            return None
        return self._cache.block_tokens, self._cache.capacity_blocks

    def prefix_cache_stats(self):
        return self._cache.stats() if self._cache is not None else (0, 0, 0)

    def take_cache_changes(self):
        return self._cache.take_changes() if self._cache is not None else []

    def new_generator(self, max_tokens, seed, extra):
        raise NotImplementedError

    def validate(self, request_id, inputs, complete, params):
        max_tokens = params["max_tokens"]
        if max_tokens is not None and not 1 <= max_tokens <= MAX_TOKENS_LIMIT:
            error = ValueError(f"engine {self.name}: max_tokens must be in [1, "
                               f"{MAX_TOKENS_LIMIT}], got {max_tokens}")
            error.field = "params.max_tokens"
            raise error
        for i, payload in enumerate(inputs):
            kind = _kind(payload)
            if kind not in self.ACCEPTS:
                error = ValueError(f"engine {self.name}: input payload {i} is {kind}, but this "
                                   f"engine accepts {' and '.join(self.ACCEPTS)}")
                error.field = f"input[{i}]"
                raise error
        self._later_piece_steps_of(params["extra"])

    def add(self, request_id, inputs, complete, params):
        if request_id in self._requests:
            raise KeyError(f"engine {self.name}: request '{request_id}' already exists")
        max_tokens = params["max_tokens"] or self.default_max_tokens
        prefill = RequestPrefill(self.block_tokens, self._cache is not None) \
            if self._prefills else None
        extra = dict(params["extra"])
        later_piece_steps = self._later_piece_steps_of(extra)
        extra.pop("later_piece_steps", None)  # The base's own: the generator never sees it.
        live = _Live(request_id, prefill,
                     self.new_generator(max_tokens, params["seed"] or 0, extra), later_piece_steps)
        for payload in inputs:
            self._append(live, payload)
        live.input.complete = complete
        self._waiting.append(live)
        self._requests[request_id] = live

    def append_input(self, request_id, chunks, last):
        live = self._requests.get(request_id)
        if live is None:
            return  # finished or aborted
        if live.input.complete:
            self._fail(request_id, f"engine {self.name}: input for request '{request_id}' "
                                   "arrived after its input was complete")
            return
        for i, chunk in enumerate(chunks):
            kind = _kind(chunk)
            if kind not in self.ACCEPTS:
                self._fail(request_id, f"engine {self.name}: streamed input chunk {i} of "
                                       f"request '{request_id}' is {kind}, but this engine "
                                       f"accepts {' and '.join(self.ACCEPTS)}")
                return
        for chunk in chunks:
            self._append(live, chunk)
        if last:
            live.input.complete = True

    def set_playback_deadline(self, request_id, seconds_left):
        live = self._requests.get(request_id)
        if live is not None:
            live.runs_out = time.monotonic_ns() / 1e9 + seconds_left

    def abort(self, request_ids):
        self._abort_calls += 1
        for request_id in request_ids:
            self._failed = [out for out in self._failed if out[0] != request_id]
            live = self._requests.pop(request_id, None)
            if live is None:
                continue
            if live.running:
                self._running.remove(live)
            else:
                self._waiting.remove(live)

    def has_work(self):
        if self._failed:
            return True
        for live in self._running:
            if live.generator.ready(live.input):
                return True
        if len(self._running) >= self.batch_size:
            return False
        return any(live.generator.ready(live.input) for live in self._waiting)

    def step(self):
        self._steps += 1
        start = time.monotonic_ns()
        outputs = self._failed
        self._failed = []
        self._admit()
        prefilled = self._prefill()
        now = time.monotonic_ns() / 1e9
        urgent = self.playback_lead > 0 and any(
            self._within_lead(live, now) and live.generator.ready(live.input)
            for live in self._running)
        kept = []
        stepped = 0
        for live in self._running:
            if not live.generator.ready(live.input):
                kept.append(live)
                continue
            if urgent and not self._within_lead(live, now):
                self._sat_out += 1
                kept.append(live)
                continue
            if self._waits_for_piece(live):
                self._piece_waits += 1
                kept.append(live)
                continue
            stepped += 1
            live.last_step = self._steps
            payloads, finish = live.generator.step(live.input)
            if payloads:
                live.produced = True
            if payloads or finish is not None:
                outputs.append((live.id, payloads, finish))
            if finish is None:
                kept.append(live)
            else:
                del self._requests[live.id]
        self._running = kept
        self._wait_out_step_time(start, self.step_us + prefilled * self.prefill_us_per_token +
                                 stepped * self.step_us_per_request)
        return outputs

    def utility(self, name, args):
        if name == "ping":
            return "pong"
        if name == "stats":
            return {"running": len(self._running), "waiting": len(self._waiting),
                    "steps": self._steps, "abort_calls": self._abort_calls,
                    "sat_out": self._sat_out, "piece_waits": self._piece_waits, "capacity": self.batch_size, **self._cache_stats()}
        raise ValueError(
            f"engine {self.name}: unknown utility '{name}' (known: ping, stats)")

    def load(self):
        return len(self._running), len(self._waiting)

    # Internals --------------------------------------------------------------

    def _cache_stats(self):
        """The cache's figures in the "stats" utility (none without a cache)."""
        if self._cache is None:
            return {}
        blocks, hit_tokens, miss_tokens = self._cache.stats()
        return {"prefix_cache_blocks": blocks,
                "prefix_cache_capacity_blocks": self._cache.capacity_blocks,
                "prefix_cache_hit_tokens": hit_tokens, "prefix_cache_miss_tokens": miss_tokens}

    @staticmethod
    def _append(live, payload):
        if isinstance(payload, str):
            live.input.text += payload
        elif isinstance(payload, list):
            live.input.tokens.extend(payload)
        if live.prefill is not None:
            live.prefill.append(payload)

    def _fail(self, request_id, message):
        self.abort([request_id])
        self._failed.append((request_id, [], "error", message))

    def _later_piece_steps_of(self, extra):
        """A request's later_piece_steps (the engine's without one); refuses any
        other extra parameter."""
        reader = Params(self.name, extra, "extra parameter")
        try:
            steps = reader.int("later_piece_steps", self.later_piece_steps, 1,
                               MAX_LATER_PIECE_STEPS)
            reader.finish()
        except ParamError as error:
            error.field = f"params.extra.{error.param}"
            raise
        return steps

    def _waits_for_piece(self, live):
        """Whether `live` waits this step for more of its input to gather."""
        if live.later_piece_steps <= 1 or not live.produced or live.input.complete:
            return False
        load = min(1.0, len(self._running) / self.batch_size)
        # Half away from zero, as C++'s llround.
        apart = 1 + int((live.later_piece_steps - 1) * load + 0.5)
        return self._steps - live.last_step < apart

    def _within_lead(self, live, now):
        return live.runs_out is None or live.runs_out - now <= self.playback_lead

    def _admit(self):
        free = self.batch_size - len(self._running)
        if free <= 0 or not self._waiting:
            return
        ready = [live for live in self._waiting if live.generator.ready(live.input)]
        if len(ready) > free:
            ready = sorted(ready, key=_soonest)[:free]  # sorted() is stable: FIFO among equals
        for live in ready:
            live.running = True
            self._running.append(live)
        self._waiting = collections.deque(live for live in self._waiting if not live.running)

    def _prefill(self):
        """Runs the running requests' new input through the cache; the tokens
        to prefill."""
        if not self._prefills:
            return 0
        return sum(live.prefill.run(self._cache, live.input.complete) for live in self._running)

    def _wait_out_step_time(self, start_ns, step_us):
        if step_us <= 0:
            return
        deadline = start_ns + step_us * 1000
        if self.busy:
            while time.monotonic_ns() < deadline:
                pass
            return
        left = deadline - time.monotonic_ns()
        if left > 0:
            time.sleep(left / 1e9)
