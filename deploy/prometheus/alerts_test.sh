#!/usr/bin/env bash
# The alerting rules are valid (promtool check rules) and each alert fires on
# the series that should raise it and stays quiet on healthy ones (promtool
# test rules alerts_test.yml). Needs Debian's prometheus package (./setup.sh).
set -euo pipefail
cd "$(dirname "$(readlink -f "$0")")"
command -v promtool >/dev/null || { echo "promtool missing: run ./setup.sh" >&2; exit 1; }
promtool check rules alerts.yml
promtool test rules alerts_test.yml
