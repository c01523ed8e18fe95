#!/usr/bin/env bash
# Installs what omnistage needs to build, test and run on Debian bookworm.
# Idempotent: when everything is present it only checks and returns.
# Usage (as root): ./setup.sh [--with-benchmark]
#   --with-benchmark  also installs nginx, for the benchmark's nginx rows
set -euo pipefail

PACKAGES=(
  # Build: Bazel 4 (WORKSPACE mode) and the compilers.
  bazel-bootstrap g++ clang-14
  # gRPC 1.51, Protobuf 3.21, Abseil 20220623, GoogleTest/GoogleMock 1.12.
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgtest-dev libgmock-dev
  # Pipeline config files; DNS lookups for discovered stages.
  libyaml-cpp-dev libc-ares-dev
  # Discovery tests run a real DNS server on loopback.
  dnsmasq-base
  # The Python client example and its test (run with /usr/bin/python3).
  python3-grpcio python3-protobuf
  # Tests that start processes look them up by port and stop them by PID.
  procps
  # The partition test cuts links with nftables rules in a network namespace of
  # its own (unshare from util-linux, ip from iproute2).
  nftables iproute2 util-linux
)
if [ "${1:-}" = "--with-benchmark" ]; then
  PACKAGES+=(nginx-light)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages present"
  exit 0
fi

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
echo "setup: done"
