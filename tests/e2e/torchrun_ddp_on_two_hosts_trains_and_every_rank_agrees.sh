#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun, real PyTorch (gloo on CPU): every rank
# joins with init_method="env://" from the environment trainit gives it, a
# DDP model takes SGD steps, and every rank checks the world size, unique
# ranks, an all_reduce and identical parameters; both hosts exit 0 and
# nothing is left running.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" GLOO_SOCKET_IFNAME=eth0 -- --mode torchrun -- "$E2E_DIR/bin/ddp_train.py" "$marks"
done
for i in 0 1; do
  expect_exit "$i" 0 120
done
for rank in 0 1 2 3; do
  [ -e "$marks/ok-$rank" ] || fail "rank $rank did not finish its checks"
done
[ "$(cat "$marks"/ok-* | sort -u | wc -l)" = 1 ] || fail "the ranks' parameters differ"
expect_output 0 "[rank 0] rank 0 of 4: every check passed"
expect_output 1 "[rank 3] rank 3 of 4: every check passed"
expect_nothing_left
e2e_log PASS
