#!/bin/bash
# 2 hosts: host 1's trainit is SIGKILLed mid-job (its ranks die with its PID
# namespace) and started again at once, well within the 1 s reconnect grace,
# as a container restarted in place would be. The new trainit is another
# instance: host 0 takes host 1 as lost, not as the same host reconnecting,
# and both exit 69; the new trainit starts no rank. Then the other way round:
# host 0 restarted at once, and host 1 (whose ranks never met the new host 0's)
# and the new host 0 both exit 69 without a rank started anew.
source "$(dirname "$0")/cluster.sh"

start_host() {
  E2E_GPUS=1 host_start_ascend "$1" -- --status-file "$E2E_DIR/h$1/status.json" -- rank.py "$2" wait
}

# Host RESTARTED's trainit killed and started again at once: both exit 69
# and no rank starts again.
expect_restart_lost() {
  local restarted=$1 marks=$2 other=$((1 - $1)) pid
  pid=$(trainit_pid "$restarted")
  kill -KILL "$pid"
  host_wait "$restarted" 10 >/dev/null
  rm -f "$marks/started-$restarted"
  start_host "$restarted" "$marks"
  expect_exit "$other" 69 10
  expect_exit "$restarted" 69 10
  expect_output "$other" "host $restarted lost: its trainit started anew after the ranks started"
  [ ! -e "$marks/started-$restarted" ] || fail "host $restarted's new trainit started a rank"
}

cluster_up 2
E2E_GPUS=1 ascend_tables
for i in 0 1; do start_host "$i" "$E2E_DIR/marks-a"; done
for r in 0 1; do wait_file "$E2E_DIR/marks-a/started-$r" 60; done
expect_restart_lost 1 "$E2E_DIR/marks-a"
expect_nothing_left

for i in 0 1; do start_host "$i" "$E2E_DIR/marks-b"; done
for r in 0 1; do wait_file "$E2E_DIR/marks-b/started-$r" 60; done
expect_restart_lost 0 "$E2E_DIR/marks-b"
expect_nothing_left
e2e_log PASS
