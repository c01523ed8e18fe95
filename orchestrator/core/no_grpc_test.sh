#!/usr/bin/env bash
# The request lifecycle, its routing and the config they read include no gRPC: every rule of
# the core is testable with fakes and a manual clock (docs/architecture.md).
# Their BUILD files depend on the protos' messages only (NAME_messages); this
# fails if a gRPC header is included anyway (system headers are always found).
set -euo pipefail
found=0
for f in "$@"; do
  if grep -nHE '#include +"(grpcpp/|grpc/|[^"]*\.grpc\.pb\.h)' "$f"; then found=1; fi
done
[ "$#" -gt 20 ] || { echo "FAIL: only $# files to check" >&2; exit 1; }
if [ "$found" = 1 ]; then
  echo "FAIL: a gRPC header in the core or its config (above)" >&2
  exit 1
fi
echo "PASS: $# files, no gRPC header"
