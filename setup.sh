#!/usr/bin/env bash
# Installs what omnistage needs to build, test and run on Debian bookworm.
# Idempotent: when everything is present it only checks and returns.
# Usage (as root): ./setup.sh [--with-benchmark] [--with-podman] | --build-only
#   --with-benchmark  also installs nginx and haproxy, for the benchmark's proxy rows, and
#                     linux-perf, for tests/bench/profile.sh
#   --with-podman     also what deploy/podman/run_sim.sh needs (podman, runc, catatonit)
#   --build-only      only what building the binaries needs (image builds)
set -euo pipefail
cd "$(dirname "$0")"

PACKAGES=(
  # Build: Bazel 4 (WORKSPACE mode) and the compilers.
  bazel-bootstrap g++ clang-14
  # gRPC 1.51, Protobuf 3.21, Abseil 20220623, GoogleTest/GoogleMock 1.12.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev
  # Pipeline config files; DNS lookups for discovered stages; the metrics endpoint.
  libyaml-cpp-dev libc-ares-dev libcpp-httplib-dev
  # Log lines (spdlog over Debian's libfmt).
  libspdlog-dev
  # The services' allocator: gperftools' TCMalloc (docs/orchestrator.md, "The allocator").
  libtcmalloc-minimal4
  # Python engines: the stage worker embeds CPython 3.11 through pybind11.
  python3-dev pybind11-dev
  # The talker's phonemes and the vocoder's speech: espeak-ng's library and
  # header to build, its data (/usr/lib/x86_64-linux-gnu/espeak-ng-data) to run.
  libespeak-ng-dev espeak-ng-data
  # The listener's speech recognizer: pocketsphinx on sphinxbase to build, its
  # en-us model (/usr/share/pocketsphinx/model/en-us) to run.
  libpocketsphinx-dev libsphinxbase-dev pocketsphinx-en-us
  # The OpenAI-compatible gateway: libevent's HTTP server (one event loop, no
  # thread per client; HTTPS through its OpenSSL bufferevents) and nlohmann's
  # JSON. OpenSSL's headers and libraries (also random ids, token digests).
  libevent-dev nlohmann-json3-dev libssl-dev
  # The gateway's Realtime API (WebSocket, /v1/realtime): wslay's framing,
  # driven from libevent's loop through I/O callbacks.
  libwslay-dev
  # The gateway's speech formats: LAME (mp3), libopusenc over libopus (Ogg
  # Opus), libFLAC (flac); its uploads for transcription: libsndfile (wav,
  # flac, ogg, mp3), resampled by libsoxr; the Realtime API's server VAD:
  # WebRTC's voice activity detector (libwebrtc-audio-processing).
  libmp3lame-dev libopusenc-dev libopus-dev libflac-dev libsndfile1-dev libsoxr-dev
  libwebrtc-audio-processing-dev
  # The gateway's Files and Batch APIs keep their state in SQLite (WAL).
  libsqlite3-dev
)
BUILD_ONLY=0
WITH_BENCHMARK=0
WITH_PODMAN=0
for arg in "$@"; do
  case "$arg" in
    --build-only) BUILD_ONLY=1 ;;
    --with-benchmark) WITH_BENCHMARK=1 ;;
    --with-podman) WITH_PODMAN=1 ;;
    *) echo "usage: $0 [--with-benchmark] [--with-podman] | --build-only" >&2; exit 2 ;;
  esac
done
if [ "$BUILD_ONLY" = 0 ]; then
  PACKAGES+=(
  # Discovery tests run a real DNS server on loopback.
  dnsmasq-base
  # Metrics tests check the exposition with promtool and scrape with a real
  # Prometheus server (the package ships both).
  prometheus
  # The Python client package and example, and their tests (run with
  # /usr/bin/python3; the package test pip-installs into a venv).
  python3-grpcio python3-protobuf python3-venv python3-pip python3-setuptools
  # Tests that start processes look them up by port and stop them by PID;
  # docs/observability.md reads /metrics with curl.
  procps curl
  # Development certificates (deploy/certs/make_dev_certs.sh) and their tests.
  openssl
  # libFuzzer and the sanitizers' runtimes for clang, and lld, the linker the
  # fuzz config names (fuzz/run_fuzzers.sh).
  libclang-rt-14-dev lld-14
  # The partition test cuts links with nftables rules in a network namespace of
  # its own (unshare from util-linux, ip from iproute2).
  nftables iproute2 util-linux
  # The gateway's console test drives the page in headless Chromium
  # (/usr/bin/chromium, through npm playwright-core).
  chromium
  )
fi
if [ "$WITH_BENCHMARK" = 1 ]; then
  PACKAGES+=(nginx-light haproxy linux-perf)
fi
if [ "$WITH_PODMAN" = 1 ]; then
  # Pods under podman (runc: crun refuses hybrid cgroup hosts; catatonit: the
  # pods' infra container), their DNS server, and the manifest rewrite.
  PACKAGES+=(podman runc catatonit dnsmasq-base python3-yaml)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ "$BUILD_ONLY" = 0 ]; then
  # The manifest test renders with kustomize and validates with Node.js
  # packages, all from npm (deploy/kubernetes/validate).
  command -v node >/dev/null || missing+=(nodejs npm)
  # The speech formats' tests read what the gateway encodes with a real
  # decoder: ffmpeg's ffprobe and ffmpeg.
  command -v ffprobe >/dev/null || missing+=(ffmpeg)
fi

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
else
  if ! grep -qs 'bookworm' /etc/os-release; then
    echo "setup: this script supports Debian bookworm only." >&2
    echo "setup: install by hand the equivalents of: ${missing[*]}" >&2
    exit 1
  fi
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages: ${missing[*]}" >&2
    echo "setup: run as root (e.g. sudo ./setup.sh), or: sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# npm packages, installed again when their lock file is newer than what was
# installed (a checkout that changed a version).
npm_ci() {  # npm_ci DIR WHAT
  if [ ! -d "$1/node_modules" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; then
    echo "setup: npm ci in $1 ($2)"
    npm ci --prefix "$1" --no-audit --no-fund --loglevel=error
  fi
}
if [ "$BUILD_ONLY" = 0 ]; then
  npm_ci deploy/kubernetes/validate "the manifest validator"
  npm_ci gateway/sdk_test "the official OpenAI SDK, for the gateway's tests"
  npm_ci gateway/console_test "playwright-core, for the gateway's console test"
  npm_ci tests/otel_js "OpenTelemetry JS, for the traces test"
fi
echo "setup: done"
