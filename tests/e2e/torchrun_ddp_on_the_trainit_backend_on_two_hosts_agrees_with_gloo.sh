#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun, real PyTorch: an unchanged DDP script
# with init_process_group("trainit") reduces within each host over the arena
# trainit made there and between the hosts over gloo among the hosts' first
# ranks; its parameters agree with the same training over gloo, and are the
# same on every rank. Both hosts exit 0 and nothing is left running.
source "$(dirname "$0")/cluster.sh"
: "${TRAINIT_E2E_COLL_SHARED:?TRAINIT_E2E_COLL_SHARED must name libtrainit_coll.so}"
: "${TRAINIT_E2E_PYTHON_DIR:?TRAINIT_E2E_PYTHON_DIR must name the python/ sources}"
mkdir -p "$E2E_DIR/py/trainit_coll"
install -m 0644 "$TRAINIT_E2E_PYTHON_DIR/trainit_coll/__init__.py" "$TRAINIT_E2E_PYTHON_DIR/trainit_coll/torch.py" \
  "$E2E_DIR/py/trainit_coll/"
install -m 0755 "$TRAINIT_E2E_COLL_SHARED" "$E2E_DIR/py/trainit_coll/libtrainit_coll.so"
install -m 0755 "$(dirname "$0")/ddp_backends.py" "$E2E_DIR/bin/ddp_backends.py"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" GLOO_SOCKET_IFNAME=eth0 PYTHONPATH="$E2E_DIR/py" -- --mode torchrun -- \
    "$E2E_DIR/bin/ddp_backends.py" "$marks"
done
for i in 0 1; do
  expect_exit "$i" 0 120
done
for rank in 0 1 2 3; do
  [ -e "$marks/ok-$rank" ] || fail "rank $rank did not finish its checks"
done
[ "$(cat "$marks"/ok-* | sort -u | wc -l)" = 1 ] || fail "the ranks' parameters differ"
expect_output 0 "[rank 0] rank 0 of 4: DDP on trainit over 2 hosts agrees with gloo"
expect_output 1 "[rank 3] rank 3 of 4: DDP on trainit over 2 hosts agrees with gloo"
expect_nothing_left
e2e_log PASS
