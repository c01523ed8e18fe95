#!/usr/bin/env python3
"""Includes run down the layers, never up (docs/architecture.md, "The layout").

Reads every C++ file of the repository and fails, naming the file, the line
and the two layers, when an include runs from a lower layer to a higher one, or
from one service into another. Run by //bazel:layering_test (on the source tree
this script lives in, whatever Bazel's cache holds: the test is tagged
external), or by hand:

  python3 bazel/layering_test.py [ROOT]     # ROOT: the repository, by default this one
"""
import os
import re
import sys

# The repository's tiers, lowest first. A folder may include its own tier and
# the tiers below it; the services (one tier) never include each other.
TIERS = [
    ["protos"],
    ["common"],
    ["client", "gateway", "orchestrator", "stage_worker"],
]

# Inside a service, its folders, lowest first; a folder not listed ranks with
# the service's top (its main and composition). Folders of one rank do not
# include each other.
SERVICE_LAYERS = {
    "orchestrator": [
        ["orchestrator/config", "orchestrator/discovery"],
        ["orchestrator/routing"],
        ["orchestrator/core"],
        ["orchestrator/replicas"],
        ["orchestrator/peers"],
        ["orchestrator/service"],
    ],
    "stage_worker": [
        ["stage_worker/engines/base"],
        ["stage_worker/engines/speech"],
        ["stage_worker/engines/models", "stage_worker/engines/python"],
        ["stage_worker/engines"],
    ],
    "gateway": [
        ["gateway/audio", "gateway/http"],
        ["gateway/batch", "gateway/chat"],
        ["gateway/console"],
        ["gateway/realtime", "gateway/speech", "gateway/transcription"],
    ],
}

# These folders hold only multi-process tests, benchmarks and fuzzers: they may
# include anything, and nothing else includes them. Test code elsewhere (unit
# tests, a package's testing/ folder) may include its own service's higher
# layers, never another service.
FREE = ["tests", "fuzz"]

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE = re.compile(r"\.(cc|h|cpp|hpp)$")


def is_test_code(path):
    name = os.path.basename(path)
    return (
        "/testing/" in path
        or re.search(r"_test\.(cc|h)$", name) is not None
        or name.endswith("_fuzzer.cc")
    )


def top(path):
    return path.split("/", 1)[0]


def tier(path):
    for rank, folders in enumerate(TIERS):
        if top(path) in folders:
            return rank
    return None


def service_rank(path):
    """(service, rank) of a file inside a layered service; None elsewhere."""
    layers = SERVICE_LAYERS.get(top(path))
    if layers is None:
        return None
    for rank, folders in enumerate(layers):
        for folder in folders:
            if path == folder or path.startswith(folder + "/"):
                return rank, folder
    return len(layers), top(path)


def violations(root):
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = [
            d for d in dirnames
            if not d.startswith(".") and not d.startswith("bazel-") and d != "node_modules"
        ]
        if rel_dir != "." and top(rel_dir) in FREE:
            continue
        for filename in filenames:
            if not SOURCE.search(filename):
                continue
            path = os.path.normpath(os.path.join(rel_dir, filename))
            from_tier = tier(path)
            if from_tier is None:
                continue
            test_code = is_test_code(path)
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                for number, line in enumerate(f, 1):
                    m = INCLUDE.match(line)
                    if not m:
                        continue
                    target = m.group(1)
                    to_tier = tier(target)
                    if to_tier is None:
                        if top(target) in FREE:
                            found.append((path, number, target, f"{top(path)} includes {top(target)}/ (only tests/ and fuzz/ may)"))
                        continue
                    if to_tier > from_tier:
                        found.append((path, number, target, f"{top(path)} includes {top(target)}, a higher tier"))
                        continue
                    if to_tier == from_tier and top(target) != top(path):
                        found.append((path, number, target, f"{top(path)} includes another service, {top(target)}"))
                        continue
                    if test_code or top(target) != top(path):
                        continue
                    source = service_rank(path)
                    dest = service_rank(target)
                    if source is None or dest is None:
                        continue
                    if dest[0] > source[0]:
                        found.append((path, number, target, f"{source[1]} includes {dest[1]}, a higher layer"))
                    elif dest[0] == source[0] and dest[1] != source[1]:
                        found.append((path, number, target, f"{source[1]} and {dest[1]} are one layer: neither includes the other"))
    return found


def main():
    here = os.path.dirname(os.path.realpath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(here)
    checked = sum(
        1 for d, _, files in os.walk(root) if "bazel-" not in d for f in files if SOURCE.search(f)
    )
    found = violations(root)
    for path, number, target, why in found:
        print(f"{path}:{number}: includes {target}: {why}")
    if found:
        print(f"FAIL: {len(found)} include(s) run up (docs/architecture.md, \"The layout\")")
        return 1
    if checked < 100:
        print(f"FAIL: only {checked} files found under {root}")
        return 1
    print(f"PASS: {checked} files, every include runs down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
