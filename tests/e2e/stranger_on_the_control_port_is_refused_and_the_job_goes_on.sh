#!/bin/bash
# With TRAINIT_JOB_SECRET on every host, a stranger at a job host's address
# connects to host 0's control port and sends garbage, an oversized length, an
# old version and a wrong secret: host 0 closes each connection, and the job
# goes on and ends with 0 on both hosts. Host 0 logs the first at once and
# counts the other three for a summary (one line per address per 10 s).
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/stranger.py" "$E2E_DIR/bin/stranger.py"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" TRAINIT_JOB_SECRET=e2e-secret-0123456789 -- --status-file "$E2E_DIR/h$i/status.json" \
    -- rank.py "$marks" until "$marks/done"
done
for r in 0 1 2 3; do wait_file "$marks/started-$r" 60; done
ip netns exec "$(host_ns 1)" python3 "$E2E_DIR/bin/stranger.py" "$(host_ip 0)" 36660 >"$E2E_DIR/stranger.out" 2>&1 ||
  fail "host 0 kept a stranger's connection open: $(cat "$E2E_DIR/stranger.out")"
touch "$marks/done"
expect_exit 0 0 30
expect_exit 1 0 30
refusals=$(grep -c "control: \(closed\|refused\) the connection from $(host_ip 1)" "$E2E_DIR/h0/out" || true)
[ "$refusals" -eq 1 ] || fail "host 0 logged $refusals lines at once for 4 bad connections from one address"
expect_output 0 "control: refused or closed 3 more connections from $(host_ip 1) in the last"
expect_nothing_left
e2e_log PASS
