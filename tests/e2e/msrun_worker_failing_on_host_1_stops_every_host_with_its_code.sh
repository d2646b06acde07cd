#!/bin/bash
# --mode auto with MA_RUN_METHOD=msrun is the msrun mode. 2 hosts × 2
# devices: the scheduler (host 0) and the 4 workers meet, then worker 3 (host
# 1) exits 5 while the others train: every host stops its processes, the
# scheduler included, and exits 5 within 2 s (msrun's --join=True: the
# other host waits for the cluster timeout); nothing is left running.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" MA_RUN_METHOD=msrun -- --mode auto --grace 5 -- "$E2E_DIR/bin/ms_stand_in.py" "$marks" 3
done
wait_file "$marks/failing-3" 60
failed=$(now_ms)
for i in 0 1; do
  expect_exit "$i" 5 10
done
took=$(($(now_ms) - failed))
[ "$took" -le 2000 ] || fail "the job took $took ms to end on every host"
e2e_log "every host exited 5, $took ms after worker 3 failed"
[ "$(cat "$marks/sched" 2>/dev/null)" = "0 1 2 3" ] || fail "the scheduler saw: $(cat "$marks/sched" 2>&1)"
expect_nothing_left
e2e_log PASS
