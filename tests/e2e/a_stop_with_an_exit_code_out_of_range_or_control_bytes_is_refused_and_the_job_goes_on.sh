#!/bin/bash
# Without a job secret, a stranger at host 2's address passes the handshake
# as host 2 (whose trainit has not started yet) and sends a STOP with exit
# code 256 (exit() would make it 0 on every host, a failure passing as a
# success) and a cause with a newline and an escape sequence (a forged log
# line, a terminal's colours): host 0 closes that connection and takes none
# of it. Host 2's trainit then starts, takes its place at the barrier (no
# rank ran yet: another trainit of a host is that host then), and the job
# goes on and ends with 0 on every host, nothing of the cause in host 0's
# log or status file.
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/stranger.py" "$E2E_DIR/bin/stranger.py"
cluster_up 3
E2E_GPUS=1 ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  E2E_GPUS=1 host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" -- rank.py "$marks" until "$marks/done"
done
deadline=$((SECONDS + 30))
until grep -qF "host 1 checked in" "$E2E_DIR/h0/out" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || fail "host 1 did not check in within 30 s"
  sleep 0.05
done
ip netns exec "$(host_ns 2)" python3 "$E2E_DIR/bin/stranger.py" "$(host_ip 0)" 36660 bad-stop "$E2E_VJ" 3 2 \
  >"$E2E_DIR/stranger.out" 2>&1 || fail "host 0 took the STOP: $(cat "$E2E_DIR/stranger.out")"
e2e_log "$(cat "$E2E_DIR/stranger.out")"
sleep 0.5 # what host 0 would do with it, it has done
E2E_GPUS=1 host_start_ascend 2 -- --status-file "$E2E_DIR/h2/status.json" -- rank.py "$marks" until "$marks/done"
for r in 0 1 2; do wait_file "$marks/started-$r" 60; done
touch "$marks/done"
expect_exit 0 0 30
expect_exit 1 0 30
expect_exit 2 0 30
grep -q "control: closed the connection from $(host_ip 2) (host 2): malformed STOP: exit code 256 is not 0-255" \
  "$E2E_DIR/h0/out" || fail "host 0 did not say why it closed the connection"
! grep -q "the job stops" "$E2E_DIR/h0/out" || fail "host 0 stopped the job: $(grep "the job stops" "$E2E_DIR/h0/out")"
! grep -q "forged" "$E2E_DIR/h0/out" "$E2E_DIR/h0/status.json" || fail "the cause reached host 0's log or status file"
! grep -q $'\x1b' "$E2E_DIR/h0/out" "$E2E_DIR/h0/status.json" || fail "an escape byte reached host 0's log or status file"
expect_nothing_left
e2e_log PASS
