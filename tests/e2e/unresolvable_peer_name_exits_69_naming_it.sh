#!/bin/bash
# Host 1's platform name never resolves: host 0 gives up after
# --peer-timeout with 69 (EX_UNAVAILABLE) and names it; it started nothing.
E2E_UNLISTED="1"
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
started=$(now_ms)
host_start_ascend 0 -- --status-file "$E2E_DIR/h0/status.json" --peer-timeout 3 -- rank.py "$marks" wait
expect_exit 0 69 20
took=$(($(now_ms) - started))
[ "$took" -ge 2900 ] && [ "$took" -le 6000 ] || fail "exit 69 came after $took ms, not after the 3 s timeout"
expect_output 0 "$(peer_name 1)"
[ ! -e "$marks/started-0" ] || fail "a rank was started"
e2e_log PASS
