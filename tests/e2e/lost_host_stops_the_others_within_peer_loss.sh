#!/bin/bash
# 3 hosts; host 0's container vanishes mid-job (its namespace destroyed with
# everything in it): hosts 1 and 2 stop their ranks and exit non-zero within
# --peer-loss + 2 s instead of hanging until a collective times out.
source "$(dirname "$0")/cluster.sh"
cluster_up 3
E2E_GPUS=1 ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1 2; do
  E2E_GPUS=1 host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" --peer-loss 3 -- rank.py "$marks" wait
done
for r in 0 1 2; do wait_file "$marks/started-$r" 60; done
host_kill_namespace 0
lost=$(now_ms)
for i in 1 2; do
  rc=$(host_wait "$i" 10)
  [ "$rc" != 0 ] || fail "host $i exited 0 after losing host 0"
done
took=$(($(now_ms) - lost))
[ "$took" -le 5000 ] || fail "the others stopped $took ms after host 0 vanished (peer loss 3 s)"
e2e_log "hosts 1 and 2 stopped $took ms after host 0 vanished"
expect_output 1 "host 0"
expect_nothing_left
e2e_log PASS
