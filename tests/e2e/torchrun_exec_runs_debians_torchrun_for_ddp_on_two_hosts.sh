#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun-exec with the real torchrun (Debian's
# PyTorch 1.13, its Std.from_str patched in memory as bench/job does): the
# command line trainit builds (--nnodes --nproc_per_node --node_rank
# --master_addr --master_port --rdzv_id --rdzv_backend=static) is one that
# torchrun's static rendezvous accepts; its agents start the DDP job of
# ddp_train.py, every rank passes its checks, both hosts exit 0 and nothing
# is left running.
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/../../bench/job/torchrun_patched.py" "$E2E_DIR/bin/torchrun_patched.py"
printf '#!/bin/sh\nexec /usr/bin/python3 %s "$@"\n' "$E2E_DIR/bin/torchrun_patched.py" >"$E2E_DIR/bin/torchrun"
chmod 0755 "$E2E_DIR/bin/torchrun"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" GLOO_SOCKET_IFNAME=eth0 -- --mode torchrun-exec -- "$E2E_DIR/bin/ddp_train.py" "$marks"
done
for i in 0 1; do
  expect_exit "$i" 0 120
done
for rank in 0 1 2 3; do
  [ -e "$marks/ok-$rank" ] || fail "rank $rank did not finish its checks"
done
[ "$(cat "$marks"/ok-* | sort -u | wc -l)" = 1 ] || fail "the ranks' parameters differ"
expect_output 0 "[host 0] rank 0 of 4: every check passed"
expect_output 1 "[host 1] rank 3 of 4: every check passed"
expect_nothing_left
e2e_log PASS
