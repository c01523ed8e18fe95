"""Engines for the python engine's tests: broken classes, exceptions from a
chosen method, malformed outputs, a recorder of threads and calls, a sim_llm
that fails or hangs in Python, an engine that resumes by continuation,
engines that declare how they take streamed input, and engines that declare a
prefix cache, well or badly."""

import ctypes
import threading
import time

from omnistage_engines.params import ParamError
from omnistage_engines.sim_llm import SimLlm, hash_bytes, hash_combine, mix64


class Echo:
    """Echoes each request's text input in one step, then stops. Parameter
    `raise_in`: the method that raises (ValueError "boom in <method>", from a
    helper so the traceback has two frames). `output: gil_hog` holds the GIL for
    3 s in each step, after creating the file `started_file` (if given)."""

    capacity = 8

    def __init__(self, params):
        self.raise_in = params.pop("raise_in", "")
        self.output = params.pop("output", "good")
        self.started_file = params.pop("started_file", "")
        if params:
            key = sorted(params)[0]
            raise ParamError(key, f"engine echo: unknown parameter '{key}'")
        self.requests = {}
        self.threads = set()
        self.has_work_calls = 0

    def _boom(self, method):
        if self.raise_in == method:
            explode(method)

    def _seen(self, method):
        self.threads.add(threading.get_ident())
        self._boom(method)

    def validate(self, request_id, inputs, complete, params):
        self._seen("validate")
        if params["extra"].get("reject"):
            error = ValueError("refused: " + params["extra"]["reject"])
            error.field = "params.extra.reject"
            raise error

    def add(self, request_id, inputs, complete, params):
        self._seen("add")
        self.requests[request_id] = "".join(p for p in inputs if isinstance(p, str))

    def append_input(self, request_id, chunks, last):
        self._seen("append_input")
        if request_id in self.requests:
            self.requests[request_id] += "".join(p for p in chunks if isinstance(p, str))

    def abort(self, request_ids):
        self._seen("abort")
        for request_id in request_ids:
            self.requests.pop(request_id, None)

    def has_work(self):
        self.has_work_calls += 1
        self._seen("has_work")
        return bool(self.requests)

    def step(self):
        self._seen("step")
        if self.output == "not_a_list":
            return 42
        if self.output == "bad_payload":
            return [(request_id, [1.5], "stop") for request_id in self.requests]
        if self.output == "bad_finish":
            return [(request_id, [], "done") for request_id in self.requests]
        if self.output == "gil_hog":
            if self.started_file:
                open(self.started_file, "w").close()
            # Holds the GIL for 3 s: a PyDLL call does not release it.
            ctypes.PyDLL(None).usleep(3000000)
        outputs = [(request_id, [text, [len(text)], text.encode(),
                                 {"pcm_s16le": b"\x01\x00", "sample_rate_hz": 24000,
                                  "channels": 1}], "stop")
                   for request_id, text in self.requests.items()]
        self.requests.clear()
        return outputs

    def utility(self, name, args):
        self._seen("utility")
        if name == "threads":
            return len(self.threads)
        if name == "has_work_calls":
            return self.has_work_calls
        if name == "echo":
            return args
        if name == "not_json":
            return object()
        if name == "unimplemented":
            raise NotImplementedError("no such thing")
        if name == "runtime":
            raise RuntimeError("it broke")
        raise ValueError(f"unknown utility '{name}'")


def explode(method):
    raise ValueError(f"boom in {method}")


class NoStep:
    capacity = 1

    def __init__(self, params):
        pass

    def validate(self, *args):
        pass

    def add(self, *args):
        pass

    def append_input(self, *args):
        pass

    def abort(self, *args):
        pass

    def has_work(self):
        return False

    def utility(self, *args):
        return None


class BadCapacity(Echo):
    capacity = "lots"


class BadResume(Echo):
    resume = "rerun"


class Incremental(Echo):
    """Declares it consumes input pieces as they arrive; echoes what arrived by
    its next step, as Echo does."""
    streamed_input = "incremental"


class Unstreamed(Echo):
    """Declares it takes no input in pieces: the worker refuses an Add whose
    input is not complete."""
    streamed_input = "none"


class BadStreamedInput(Echo):
    streamed_input = "pieces"


class Caching(Echo):
    """Echo with a prefix cache: each request added stores the block 2**64 - 1
    (the largest name). `raise_in` covers prefix_cache_stats and
    take_cache_changes too; `cache_output: bad` makes both return malformed
    values."""

    prefix_cache = (4, 100)

    def __init__(self, params):
        self.cache_output = params.pop("cache_output", "good")
        super().__init__(params)
        self.blocks = 0
        self.changes = []

    def add(self, request_id, inputs, complete, params):
        super().add(request_id, inputs, complete, params)
        self.blocks += 1
        self.changes.append(((1 << 64) - 1, True))

    def prefix_cache_stats(self):
        self._boom("prefix_cache_stats")
        if self.cache_output == "bad":
            return (1, "two", 3)
        return (self.blocks, 16, 2)

    def take_cache_changes(self):
        self._boom("take_cache_changes")
        if self.cache_output == "bad":
            return [((1 << 64) - 1, True), (-1, True)]
        changes, self.changes = self.changes, []
        return changes


class CachingQuietly(Caching):
    """A cache that does not report its changes."""

    take_cache_changes = None


class BadPrefixCache(Echo):
    prefix_cache = (0, 10)


class CacheWithoutStats(Echo):
    prefix_cache = (16, 10)


class Continuing:
    """Resumes by continuation, as a vLLM-style engine does: a request's output
    is tokens 0 .. max_tokens - 1 of a sequence fixed by its text and seed, one
    token per step; one that arrives with params["produced"] starts after the
    tokens it already produced (and, having them all, ends at once)."""

    resume = "continuation"
    capacity = 8

    def __init__(self, params):
        if params:
            key = sorted(params)[0]
            raise ParamError(key, f"engine continuing: unknown parameter '{key}'")
        self.requests = {}  # request_id -> [sequence seed, next index, max_tokens]

    def validate(self, request_id, inputs, complete, params):
        if not complete or not all(isinstance(p, str) for p in inputs):
            raise ValueError("continuing: the input must be whole text")
        for i, payload in enumerate(params["produced"]):
            if not isinstance(payload, list):
                error = ValueError("continuing: it produces tokens only")
                error.field = f"produced[{i}]"
                raise error

    def add(self, request_id, inputs, complete, params):
        key = hash_combine(hash_bytes("".join(inputs).encode()), params["seed"] or 0)
        done = sum(len(p) for p in params["produced"])
        self.requests[request_id] = [key, done, params["max_tokens"] or 16]

    def append_input(self, request_id, chunks, last):
        pass

    def abort(self, request_ids):
        for request_id in request_ids:
            self.requests.pop(request_id, None)

    def has_work(self):
        return bool(self.requests)

    def step(self):
        outputs = []
        for request_id, state in list(self.requests.items()):
            key, index, max_tokens = state
            if index >= max_tokens:
                del self.requests[request_id]
                outputs.append((request_id, [], "length"))
                continue
            state[1] = index + 1
            token = mix64((key + index) & ((1 << 64) - 1)) % 1000
            if state[1] >= max_tokens:
                del self.requests[request_id]
                outputs.append((request_id, [[token]], "length"))
            else:
                outputs.append((request_id, [[token]]))
        return outputs

    def utility(self, name, args):
        return None


class Ticker(SimLlm):
    """SimLlm with a Python thread that counts while the worker's loop idles:
    it runs only if the loop leaves the GIL free between calls."""

    def __init__(self, params):
        super().__init__(params)
        self.ticks = 0
        threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self):
        while True:
            self.ticks += 1
            time.sleep(0.001)

    def utility(self, name, args):
        if name == "ticks":
            return self.ticks
        return super().utility(name, args)


class FaultySimLlm(SimLlm):
    """SimLlm whose step goes wrong inside the interpreter, for the tests of
    what a Python exception or hang does to a worker (the worker's own
    fail_at_step and hang_at_step act outside Python, around any engine).
    `raise_at_step` N: the N-th step raises RuntimeError; `sleep_at_step` N:
    the N-th step sleeps for good."""

    def __init__(self, params):
        self.raise_at_step = int(params.pop("raise_at_step", "0"))
        self.sleep_at_step = int(params.pop("sleep_at_step", "0"))
        self.step_calls = 0
        super().__init__(params)

    def step(self):
        self.step_calls += 1
        if self.step_calls == self.raise_at_step:
            raise RuntimeError(f"raised at step {self.step_calls} (raise_at_step)")
        if self.step_calls == self.sleep_at_step:
            while True:
                time.sleep(3600)
        return super().step()


class Constant:
    """The cheapest engine a Python class can be: one fixed token per request
    per step. Measures what the adapter itself costs (GIL, calls, conversion)."""

    def __init__(self, params):
        self.capacity = int(params.get("batch_size", "64"))
        self.left = {}

    def validate(self, request_id, inputs, complete, params):
        pass

    def add(self, request_id, inputs, complete, params):
        self.left[request_id] = params["max_tokens"] or 32

    def append_input(self, request_id, chunks, last):
        pass

    def abort(self, request_ids):
        for request_id in request_ids:
            self.left.pop(request_id, None)

    def has_work(self):
        return bool(self.left)

    def step(self):
        outputs = []
        for request_id, left in list(self.left.items()):
            if left <= 1:
                del self.left[request_id]
                outputs.append((request_id, [[7]], "length"))
            else:
                self.left[request_id] = left - 1
                outputs.append((request_id, [[7]]))
        return outputs

    def utility(self, name, args):
        return None
