#!/usr/bin/env bash
# The chaos soak, sized for CI: a few thousand requests in well under a minute.
set -euo pipefail
exec tests/chaos_soak --requests=3000 --clients=16 --seed=1 "$@"
