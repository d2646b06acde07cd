#!/bin/bash
# 3 hosts, one rank each; host 2 is late, so the barrier holds. Host 1 has
# checked in when host 0's container vanishes (its namespace destroyed with
# everything in it). Host 1 does not wait out --barrier-timeout: within
# --peer-loss (+ 2 s) it exits 69, the status file saying host 0 was
# lost, and no rank ever started.
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/fault_checks.bash"

cluster_up 3
E2E_GPUS=1 ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  E2E_GPUS=1 host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" --peer-loss 2 \
    --barrier-timeout 60 -- rank.py "$marks" wait
done
deadline=$((SECONDS + 30))
until grep -qF "host 1 checked in" "$E2E_DIR/h0/out" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || fail "host 1 did not check in within 30 s"
  sleep 0.05
done
host_kill_namespace 0
killed=$(now_ms)
expect_exit 1 69 10
took=$(($(now_ms) - killed))
[ "$took" -le 4000 ] || fail "host 1 exited $took ms after host 0 vanished (peer loss 2 s)"
e2e_log "host 1 exited $took ms after host 0 vanished"
expect_status 1 69 "host 0" "lost"
[ ! -e "$marks" ] || [ -z "$(ls -A "$marks")" ] || fail "a rank started: $(ls "$marks")"
expect_found_nothing_left 1
expect_nothing_left
e2e_log PASS
