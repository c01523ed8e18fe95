#!/usr/bin/env bash
# Builds the three omnistage images without pulling anything: the binaries come
# from this checkout's Bazel build, and each image's root filesystem is only
# those binaries, the shared libraries they load (found with ldd), espeak-ng's
# data (the talker and vocoder speak with it), pocketsphinx's en-us model (the
# listener hears with it), and a passwd/group naming the
# non-root user 65532. The filesystem is imported with Debian's podman (or
# buildah).
#
#   deploy/images/build.sh                 # omnistage/orchestrator:dev, omnistage/stage-worker:dev,
#                                          # omnistage/gateway:dev
#   deploy/images/build.sh --tag 0.1.0     # another tag
#   BAZEL_FLAGS="" deploy/images/build.sh  # fastbuild binaries (the default is -c opt)
#
# The orchestrator image carries stage_worker too (a flat install in
# /usr/local/bin: the orchestrator finds it next to itself for `replicas:`
# stages). The gateway image (the OpenAI-compatible HTTP API, gateway/) is the
# gateway alone, with the libraries it loads (libevent's among them). For a
# registry-based build from Debian bookworm-slim, see deploy/images/Containerfile.
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")/../.."

tag=dev
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="$2"; shift 2 ;;
    *) echo "usage: $0 [--tag TAG]" >&2; exit 2 ;;
  esac
done

if ! command -v podman >/dev/null; then
  echo "build.sh: needs podman (apt-get install podman)" >&2
  exit 1
fi

# shellcheck disable=SC2086  # BAZEL_FLAGS is a list of flags.
bazel build ${BAZEL_FLAGS--c opt} //orchestrator //stage_worker //gateway
bin="$(bazel info ${BAZEL_FLAGS--c opt} bazel-bin 2>/dev/null)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Where Debian's libespeak-ng reads its data (package espeak-ng-data); the
# library is no use without it.
espeak_data=/usr/lib/x86_64-linux-gnu/espeak-ng-data
# Where the listener's default model lives (package pocketsphinx-en-us).
sphinx_model=/usr/share/pocketsphinx/model/en-us

# rootfs DIR BINARY...: the binaries in DIR/usr/local/bin, plus their libraries.
rootfs() {
  local dir="$1"; shift
  mkdir -p "$dir/usr/local/bin" "$dir/etc" "$dir/tmp"
  chmod 1777 "$dir/tmp"
  for binary in "$@"; do
    install -m 0755 "$binary" "$dir/usr/local/bin/"
    # ldd's output read whole first: `ldd | grep -q` under pipefail fails now and
    # then (grep stops reading at its match, ldd dies of SIGPIPE), and an image
    # then went without espeak-ng's data.
    local libs
    libs="$(ldd "$binary")"
    # Every library the dynamic loader resolves, and the loader itself, at the
    # paths the binary asks for (the loader's own path is absolute in ldd's output).
    awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' <<<"$libs" | while read -r lib; do
      mkdir -p "$dir$(dirname "$lib")"
      cp -L "$lib" "$dir$lib"
    done
    if grep -q 'libespeak-ng\.so' <<<"$libs" && [ ! -d "$dir$espeak_data" ]; then
      [ -d "$espeak_data" ] || { echo "build.sh: $espeak_data missing (apt-get install espeak-ng-data)" >&2; exit 1; }
      mkdir -p "$dir$(dirname "$espeak_data")"
      cp -rL "$espeak_data" "$dir$espeak_data"
    fi
    if grep -q 'libpocketsphinx\.so' <<<"$libs" && [ ! -d "$dir$sphinx_model" ]; then
      [ -d "$sphinx_model" ] || { echo "build.sh: $sphinx_model missing (apt-get install pocketsphinx-en-us)" >&2; exit 1; }
      mkdir -p "$dir$(dirname "$sphinx_model")"
      cp -rL "$sphinx_model" "$dir$sphinx_model"
    fi
  done
  # Debian's loader lives at /lib64/ld-linux-x86-64.so.2 -> /lib/x86_64-linux-gnu/...
  printf 'root:x:0:0:root:/root:/sbin/nologin\nomnistage:x:65532:65532:omnistage:/tmp:/sbin/nologin\n' \
    >"$dir/etc/passwd"
  printf 'root:x:0:\nomnistage:x:65532:\n' >"$dir/etc/group"
  printf 'hosts: files dns\n' >"$dir/etc/nsswitch.conf"
}

# image NAME ENTRYPOINT DIR: imports DIR as NAME:tag, running ENTRYPOINT as 65532.
image() {
  local name="$1" entrypoint="$2" dir="$3"
  tar -C "$dir" --owner=0 --group=0 --numeric-owner -c . |
    podman import --quiet \
      --change "USER 65532:65532" \
      --change "WORKDIR /tmp" \
      --change "ENTRYPOINT [\"$entrypoint\"]" \
      --change "LABEL org.opencontainers.image.source=omnistage" \
      - "$name:$tag" >/dev/null
  echo "built $name:$tag ($(du -sh "$dir" | cut -f1) uncompressed)"
}

rootfs "$work/worker" "$bin/stage_worker/stage_worker"
image omnistage/stage-worker /usr/local/bin/stage_worker "$work/worker"
rootfs "$work/orchestrator" "$bin/orchestrator/orchestrator" "$bin/stage_worker/stage_worker"
image omnistage/orchestrator /usr/local/bin/orchestrator "$work/orchestrator"
rootfs "$work/gateway" "$bin/gateway/gateway"
image omnistage/gateway /usr/local/bin/gateway "$work/gateway"
