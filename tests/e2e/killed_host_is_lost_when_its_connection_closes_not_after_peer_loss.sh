#!/bin/bash
# 3 hosts, --peer-loss 10 (the default): host 2's trainit is SIGKILLed
# mid-job (its container killed: the kernel closes its control connection at
# once). Host 0 does not wait out the 10 s of silence: the closed connection
# makes host 2 lost after the reconnect grace (1 s), and hosts 0 and 1 stop
# with 69 within 3 s. Then the other direction: host 0's trainit SIGKILLed,
# its connection closes at every host, and they stop with 69 within 3 s too.
# Silence without a close (a cut link) still takes --peer-loss:
# lost_host_stops_the_others_within_peer_loss.sh.
source "$(dirname "$0")/cluster.sh"

# Starts 3 hosts with one rank each and waits until every rank runs.
start_job() {
  local marks=$1 i r
  for i in 0 1 2; do
    E2E_GPUS=1 host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" -- rank.py "$marks" wait
  done
  for r in 0 1 2; do wait_file "$marks/started-$r" 60; done
}

# Host KILLED's trainit SIGKILLed: every other host exits 69 within 3 s.
expect_loss_noticed() {
  local killed=$1 i took
  kill -KILL "$(trainit_pid "$killed")"
  local killed_at
  killed_at=$(now_ms)
  for i in 0 1 2; do
    [ "$i" != "$killed" ] || continue
    expect_exit "$i" 69 12
  done
  took=$(($(now_ms) - killed_at))
  [ "$took" -le 3000 ] || fail "the others stopped $took ms after host $killed was killed (its connection closed at once)"
  e2e_log "the others stopped $took ms after host $killed was killed"
  for i in 0 1 2; do
    [ "$i" != "$killed" ] || continue
    expect_output "$i" "host $killed lost"
  done
  host_wait "$killed" 10 >/dev/null
}

cluster_up 3
E2E_GPUS=1 ascend_tables
start_job "$E2E_DIR/marks-a"
expect_loss_noticed 2
expect_nothing_left

start_job "$E2E_DIR/marks-b"
expect_loss_noticed 0
expect_nothing_left
e2e_log PASS
