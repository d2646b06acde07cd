#!/bin/bash
# Once the ranks run, host 0 keeps CAP_SYS_NICE besides CAP_KILL and every
# other host CAP_KILL alone; rank 0 (host 0) exits 5 → host 0 writes the
# job-wide stop to host 1 in the real-time class (its -v log says so), and
# every host exits 5 with nothing left running.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" -- -v --status-file "$E2E_DIR/h$i/status.json" --grace 5 -- \
    rank.py "$marks" fail-when "$E2E_DIR/fail" 0 5
done
for r in 0 1 2 3; do wait_file "$marks/started-$r" 60; done
cap_eff() { awk '$1 == "CapEff:" {print $2}' "/proc/$(trainit_pid "$1")/status"; }
kill_and_nice=0000000000800020 # CAP_KILL (5), CAP_SYS_NICE (23)
kill_only=0000000000000020
deadline=$((SECONDS + 10))
until [ "$(cap_eff 0)" = "$kill_and_nice" ] && [ "$(cap_eff 1)" = "$kill_only" ]; do
  [ "$SECONDS" -lt "$deadline" ] || fail "CapEff: host 0 $(cap_eff 0), host 1 $(cap_eff 1); expected $kill_and_nice, $kill_only"
  sleep 0.05
done
e2e_log "host 0 keeps CAP_KILL and CAP_SYS_NICE, host 1 CAP_KILL"
touch "$E2E_DIR/fail"
expect_exit 0 5 10
expect_exit 1 5 10
expect_output 0 "control: stop written to 1 host in"
grep -F "control: stop written to 1 host in" "$E2E_DIR/h0/out" | grep -qF ", ahead of the fair class" ||
  fail "host 0 wrote the stop in the fair class: $(grep -F 'stop written' "$E2E_DIR/h0/out")"
expect_nothing_left
e2e_log PASS
