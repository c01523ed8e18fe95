#!/usr/bin/env bash
# Runs the partition test in a network namespace of its own, with loopback up, so
# that its nftables rules can touch nothing outside it and vanish with it. The
# test checks that it is not in the namespace this script started in.
set -euo pipefail
OMNISTAGE_OUTER_NETNS=$(stat -L -c %i /proc/self/ns/net)
export OMNISTAGE_OUTER_NETNS
exec unshare --net -- bash -c 'ip link set lo up && exec "$@"' - tests/partition_test_bin "$@"
