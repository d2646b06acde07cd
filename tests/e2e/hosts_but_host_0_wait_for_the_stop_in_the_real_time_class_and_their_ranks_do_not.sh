#!/bin/bash
# Once its ranks run, every host of several but host 0 waits for the job's
# end in the real-time class (SCHED_FIFO at priority 1, reset on fork), so a
# stop is taken when it comes; host 0 stays in the fair class while the job
# runs (its fan-outs alone go ahead), and every rank on every host runs in
# the fair class. Rank 2 (host 1) exits 4 → every host exits 4, nothing left.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" --grace 5 -- \
    rank.py "$marks" fail-when "$E2E_DIR/fail" 2 4
done
for r in 0 1 2 3; do wait_file "$marks/started-$r" 60; done

# "policy" and "prio" of /proc/PID/sched: the scheduling class and priority.
policy() { awk '$1 == "policy" {print $3}' "/proc/$1/sched"; }
priority() { awk '$1 == "prio" {print $3}' "/proc/$1/sched"; }
children() { cat /proc/"$1"/task/*/children; }
host0=$(trainit_pid 0)
host1=$(trainit_pid 1)
# The spawn ends before the state running is entered: give it a moment.
deadline=$((SECONDS + 10))
until [ "$(policy "$host1")" = 1 ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "host 1's trainit has policy $(policy "$host1"), expected 1 (SCHED_FIFO)"
  sleep 0.05
done
[ "$(priority "$host1")" = 98 ] || fail "host 1's trainit has prio $(priority "$host1"), expected 98 (SCHED_FIFO 1)"
[ "$(policy "$host0")" = 0 ] || fail "host 0's trainit has policy $(policy "$host0"), expected 0 (SCHED_OTHER)"
e2e_log "host 1's trainit waits in SCHED_FIFO 1, host 0's in SCHED_OTHER"
ranks=0
for parent in "$host0" "$host1"; do
  for pid in $(children "$parent"); do
    [ "$(policy "$pid")" = 0 ] || fail "rank $pid (child of $parent) has policy $(policy "$pid"), expected 0 (SCHED_OTHER)"
    ranks=$((ranks + 1))
  done
done
[ "$ranks" = 4 ] || fail "found $ranks ranks under the two trainits, expected 4"
e2e_log "all 4 ranks run in SCHED_OTHER"
touch "$E2E_DIR/fail"
expect_exit 0 4 10
expect_exit 1 4 10
expect_nothing_left
e2e_log PASS
