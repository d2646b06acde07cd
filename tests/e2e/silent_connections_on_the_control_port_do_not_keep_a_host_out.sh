#!/bin/bash
# While a stranger at host 1's own address holds 70 connections to host 0's
# control port that never say HELLO (opening a new one whenever host 0 closes
# one), and another, at an address that is not the job's, floods the port with
# connections: host 1 still joins at once (within 3 s of starting: without the
# oldest of its address giving way, it would wait for a slot to time out), the
# job ends with 0 on both hosts, and host 0's log holds a bounded number of
# lines about the strangers (one per address per 10 s, then a summary).
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/stranger.py" "$E2E_DIR/bin/stranger.py"
cluster_up 2
# The flooder's namespace: on the job's bridge, at an address that is not a
# host of the job (removed with the cluster: its name is $E2E_ID-*).
outsider="$E2E_ID-outsider"
ip netns add "$outsider"
ip -n "$E2E_ID-br" link add hx type veth peer name eth0 netns "$outsider"
ip -n "$E2E_ID-br" link set hx master br0 up
ip -n "$outsider" link set lo up
ip -n "$outsider" addr add "$E2E_SUBNET.99/24" dev eth0
ip -n "$outsider" link set eth0 up
ascend_tables
marks="$E2E_DIR/marks"
host_start_ascend 0 -- --status-file "$E2E_DIR/h0/status.json" --barrier-timeout 40 -- rank.py "$marks" until "$marks/done"
ip netns exec "$(host_ns 1)" python3 "$E2E_DIR/bin/stranger.py" "$(host_ip 0)" 36660 silent 70 12 "$E2E_DIR/holding" \
  >"$E2E_DIR/silent.out" 2>&1 &
silent_pid=$!
ip netns exec "$outsider" python3 "$E2E_DIR/bin/stranger.py" "$(host_ip 0)" 36660 flood 12 >"$E2E_DIR/flood.out" 2>&1 &
flood_pid=$!
wait_file "$E2E_DIR/holding" 60
sleep 0.5 # every one of them accepted: host 0's slots are taken
started=$(now_ms)
host_start_ascend 1 -- --status-file "$E2E_DIR/h1/status.json" -- rank.py "$marks" until "$marks/done"
for r in 0 1 2 3; do wait_file "$marks/started-$r" 30; done
joined=$(($(now_ms) - started))
e2e_log "host 1's ranks started ${joined} ms after host 1 did"
[ "$joined" -lt 3000 ] || fail "host 1 took ${joined} ms to get past 70 silent connections"
# The job runs on while the strangers do (12 s: past one 10-s interval of
# host 0's warnings), then ends.
wait "$silent_pid" || fail "the silent stranger failed: $(cat "$E2E_DIR/silent.out")"
wait "$flood_pid" || fail "the flooder failed: $(cat "$E2E_DIR/flood.out")"
touch "$marks/done"
expect_exit 0 0 30
expect_exit 1 0 30
e2e_log "$(cat "$E2E_DIR/silent.out")"
e2e_log "$(cat "$E2E_DIR/flood.out")"
flooded=$(sed -n 's/^stranger: flood: \([0-9]*\) connections$/\1/p' "$E2E_DIR/flood.out")
[ "${flooded:-0}" -ge 500 ] || fail "the flooder made only ${flooded:-0} connections: it proves nothing"
# Each stranger's lines: the first at once, then one summary per 10 s (the
# strangers ran for 12 s) and one when host 0's channel closed.
for who in "$(host_ip 1)" "$E2E_SUBNET.99"; do
  lines=$(grep -c "control: .*from $who\b" "$E2E_DIR/h0/out" || true)
  e2e_log "host 0's lines about $who: $lines"
  [ "$lines" -ge 1 ] && [ "$lines" -le 4 ] || fail "host 0 logged $lines lines about $who: $(grep "from $who\b" "$E2E_DIR/h0/out" | head -20)"
done
expect_nothing_left
e2e_log PASS
