#!/bin/bash
# Without a job secret, a stranger at host 1's address passes the handshake
# as host 1 and sends a STOP with exit code 256 (exit() would make it 0 on
# every host, a failure passing as a success) and a cause with a newline and
# an escape sequence (a forged log line, a terminal's colours): host 0 closes
# that connection, takes none of it, and the job goes on and ends with 0 on
# both hosts, nothing of the cause in host 0's log or status file.
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/stranger.py" "$E2E_DIR/bin/stranger.py"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" -- rank.py "$marks" until "$marks/done"
done
for r in 0 1 2 3; do wait_file "$marks/started-$r" 60; done
ip netns exec "$(host_ns 1)" python3 "$E2E_DIR/bin/stranger.py" "$(host_ip 0)" 36660 bad-stop "$E2E_VJ" 2 \
  >"$E2E_DIR/stranger.out" 2>&1 || fail "host 0 took the STOP: $(cat "$E2E_DIR/stranger.out")"
e2e_log "$(cat "$E2E_DIR/stranger.out")"
sleep 0.5 # what host 0 would do with it, it has done
touch "$marks/done"
expect_exit 0 0 30
expect_exit 1 0 30
grep -q "control: closed the connection from $(host_ip 1) (host 1): malformed STOP: exit code 256 is not 0-255" \
  "$E2E_DIR/h0/out" || fail "host 0 did not say why it closed the connection"
! grep -q "the job stops" "$E2E_DIR/h0/out" || fail "host 0 stopped the job: $(grep "the job stops" "$E2E_DIR/h0/out")"
! grep -q "forged" "$E2E_DIR/h0/out" "$E2E_DIR/h0/status.json" || fail "the cause reached host 0's log or status file"
! grep -q $'\x1b' "$E2E_DIR/h0/out" "$E2E_DIR/h0/status.json" || fail "an escape byte reached host 0's log or status file"
expect_nothing_left
e2e_log PASS
