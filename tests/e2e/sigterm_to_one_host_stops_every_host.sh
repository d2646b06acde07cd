#!/bin/bash
# SIGTERM to host 1's trainit (what `docker stop` does): every host stops its
# ranks; host 1 exits 143, and so does host 0 (the first failure's code).
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" -- rank.py "$marks" wait
done
for r in 0 1 2 3; do wait_file "$marks/started-$r" 60; done
kill -TERM "$(trainit_pid 1)"
sent=$(now_ms)
expect_exit 1 143 10
expect_exit 0 143 10
took=$(($(now_ms) - sent))
[ "$took" -le 2000 ] || fail "every host stopped only $took ms after the SIGTERM"
expect_nothing_left
e2e_log PASS
