"""Reading an engine's string parameters, as the C++ EngineParams does: every
value checked, unknown keys refused, each error naming its parameter."""


class ParamError(ValueError):
    """A refused parameter; `param` names it (the worker reports
    engine_params.<param>)."""

    def __init__(self, param, message):
        super().__init__(message)
        self.param = param


class Params:
    def __init__(self, engine, values, what="parameter"):
        self._engine = engine
        self._values = dict(values)
        self._what = what
        self._known = []

    def _lookup(self, key):
        if key not in self._known:
            self._known.append(key)
        return self._values.get(key)

    def _fail(self, key, expected, raw):
        raise ParamError(
            key, f"engine {self._engine}: {self._what} {key}: expected {expected}, got '{raw}'")

    def int(self, key, default, low, high):
        raw = self._lookup(key)
        if raw is None:
            return default
        try:
            value = int(raw, 10)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            self._fail(key, f"an integer in [{low}, {high}]", raw)
        return value

    def bool(self, key, default):
        raw = self._lookup(key)
        if raw is None:
            return default
        lowered = raw.lower()
        if lowered in ("true", "t", "yes", "y", "1"):
            return True
        if lowered in ("false", "f", "no", "n", "0"):
            return False
        self._fail(key, "a boolean (true or false)", raw)

    def micros(self, key, default, high):
        """A duration in microseconds (a bare integer)."""
        raw = self._lookup(key)
        if raw is None:
            return default
        try:
            value = int(raw, 10)
        except ValueError:
            value = -1
        if not 0 <= value <= high:
            self._fail(key, f"a duration in [0, {high}] microseconds", raw)
        return value

    def text(self, key, default=None):
        """A string; with default None the parameter is required."""
        raw = self._lookup(key)
        if raw is None:
            if default is None:
                raise ParamError(key, f"engine {self._engine}: parameter {key} is required")
            return default
        return raw

    def enum(self, key, default, allowed):
        raw = self._lookup(key)
        if raw is None:
            return default
        if raw not in allowed:
            self._fail(key, "one of " + ", ".join(allowed), raw)
        return raw

    def finish(self):
        for key in self._values:
            if key not in self._known:
                known = ", ".join(self._known) or "none"
                raise ParamError(
                    key, f"engine {self._engine}: unknown {self._what} '{key}' (known: {known})")
