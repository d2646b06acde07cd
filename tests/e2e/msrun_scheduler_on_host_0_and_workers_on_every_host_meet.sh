#!/bin/bash
# 2 hosts × 2 devices, --mode msrun: host 0 runs the scheduler
# (MS_ROLE=MS_SCHED) and every host one worker per device; each worker checks
# its MS_* environment and reaches the scheduler at host 0's address; the
# scheduler sees all 4; logs in msrun's layout (scheduler.log, worker_N.log).
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  mkdir -p "$E2E_DIR/h$i/ma/log"
  host_start "$i" MA_MOUNT_PATH="$E2E_DIR/h$i/ma" -- --mode msrun -- "$E2E_DIR/bin/ms_stand_in.py" "$marks"
done
for i in 0 1; do
  expect_exit "$i" 0 60
done
[ "$(cat "$marks/sched" 2>/dev/null)" = "0 1 2 3" ] || fail "the scheduler saw: $(cat "$marks/sched" 2>&1)"
for rank in 0 1 2 3; do
  [ "$(cat "$marks/worker-$rank" 2>/dev/null)" = "$(host_ip 0):8118" ] || fail "worker $rank: $(cat "$marks/worker-$rank" 2>&1)"
done
[ -f "$E2E_DIR/h0/ma/log/scheduler.log" ] || fail "no scheduler.log on host 0"
[ ! -e "$E2E_DIR/h1/ma/log/scheduler.log" ] || fail "a scheduler on host 1"
for f in h0/ma/log/worker_0.log h0/ma/log/worker_1.log h1/ma/log/worker_2.log h1/ma/log/worker_3.log; do
  [ -f "$E2E_DIR/$f" ] || fail "no $f"
done
expect_nothing_left
e2e_log PASS
