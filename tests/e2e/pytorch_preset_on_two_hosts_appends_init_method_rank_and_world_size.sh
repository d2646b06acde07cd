#!/bin/bash
# 2 hosts, --mode pytorch: each host runs the script once with
# --init_method tcp://<host 0's name>:29500 --rank <host> --world_size 2
# appended; the two join over gloo and check an all_reduce.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" GLOO_SOCKET_IFNAME=eth0 -- --mode pytorch -- python3 "$E2E_DIR/bin/pytorch_init_method.py" "$marks"
done
for i in 0 1; do
  expect_exit "$i" 0 120
done
for rank in 0 1; do
  [ "$(cat "$marks/ok-$rank" 2>/dev/null)" = "tcp://$(peer_name 0):29500" ] || fail "host $rank: $(cat "$marks/ok-$rank" 2>&1)"
done
expect_nothing_left
e2e_log PASS
