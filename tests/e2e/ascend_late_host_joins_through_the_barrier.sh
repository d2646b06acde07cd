#!/bin/bash
# Host 1 starts 15 s after host 0 (a slow data download); the ranks'
# rendezvous times out after 5 s. Without the barrier host 0's ranks would
# start at once and give up; with it, every rank starts once both hosts
# checked in, and the job succeeds.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
host_start_ascend 0 -- --status-file "$E2E_DIR/h0/status.json" -- rank.py "$marks" rendezvous 5
sleep 15 # the late host: the delay is the scenario, not a synchronisation
[ ! -e "$marks/started-0" ] || fail "host 0 started its ranks before host 1 checked in"
host_start_ascend 1 -- --status-file "$E2E_DIR/h1/status.json" -- rank.py "$marks" rendezvous 5
expect_exit 0 0 60
expect_exit 1 0 60
expect_nothing_left
e2e_log PASS
