#!/bin/bash
# 2 hosts × 2 ranks (Ascend rank table): rank 3, on host 1, exits 3 → every
# host stops its ranks and exits 3 within 2 s; the status files name the host
# and the rank that failed; nothing is left running anywhere.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" --grace 5 -- rank.py "$marks" fail-if 3 3
done
wait_file "$marks/failing-3" 60
failed=$(now_ms)
for i in 0 1; do
  expect_exit "$i" 3 10
done
took=$(($(now_ms) - failed))
[ "$took" -le 2000 ] || fail "the job took $took ms to end on every host"
e2e_log "every host exited 3, $took ms after rank 3 failed"
for i in 0 1; do
  status_of "$i" | grep -q '"cause": *"[^"]*host 1[^"]*rank 3' || fail "host $i's status names no host 1 / rank 3: $(status_of "$i")"
done
expect_nothing_left
e2e_log PASS
