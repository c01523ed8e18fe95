#!/usr/bin/env python3
"""Every program that links WebRTC's audio processing library has a main of its own.

Debian's libwebrtc_audio_processing.so exports a `main` (bazel/BUILD,
webrtc_audio_processing): a test whose main would come from an archive
(gtest_main, libFuzzer) gets the library's instead, which prints a usage line
and exits 0 — a test that runs nothing and passes. This reads every test and
fuzzer source, follows its includes through the repository's headers, and
fails, naming the file, when they reach the library's one user
(gateway/audio/voice_activity.h) and the file defines no main. Run by
//bazel:own_main_test (tagged external: it reads the source tree), or by hand:

  python3 bazel/own_main_test.py [ROOT]
"""
import os
import re
import sys

LINKS_WEBRTC = "gateway/audio/voice_activity.h"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
MAIN = re.compile(r"^int main\(", re.M)
PROGRAM = re.compile(r"_(test|fuzzer)\.cc$")


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "bazel-"))]
        for name in filenames:
            if name.endswith((".cc", ".h")):
                path = os.path.relpath(os.path.join(dirpath, name), root)
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    yield path, f.read()


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.realpath(__file__)))
    text = dict(sources(root))
    includes = {path: set(INCLUDE.findall(body)) for path, body in text.items()}
    reaches = {}

    def reach(path, seen):
        if path in reaches:
            return reaches[path]
        if path in seen:
            return False
        seen.add(path)
        found = any(inc == LINKS_WEBRTC or (inc in includes and reach(inc, seen))
                    for inc in includes.get(path, ()))
        reaches[path] = found
        return found

    bad = [path for path in sorted(text)
           if PROGRAM.search(path) and reach(path, set()) and not MAIN.search(text[path])]
    checked = sum(1 for path in text if PROGRAM.search(path))
    for path in bad:
        print(f"{path}: links {LINKS_WEBRTC}'s library (through its includes) but defines no "
              "main: the library's own would run instead (bazel/BUILD, webrtc_audio_processing)")
    print(f"{checked} test and fuzzer sources, {len(bad)} without the main they need")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
