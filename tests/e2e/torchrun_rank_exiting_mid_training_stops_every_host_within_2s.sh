#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun, real PyTorch: rank 3 (host 1) exits 7
# at its third step (at once: ddp_train.py says why) while the others wait
# in DDP's all_reduce, then fail on its closed connections; every host
# stops its ranks and exits 7 within 2 s (torchrun's agent: 5 s polls, and
# the other host hangs until gloo's timeout); nothing is left running.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
for i in 0 1; do
  host_start "$i" GLOO_SOCKET_IFNAME=eth0 -- --mode torchrun --grace 5 -- "$E2E_DIR/bin/ddp_train.py" "$marks" 3 2
done
wait_file "$marks/failing-3" 120
failed=$(now_ms)
for i in 0 1; do
  expect_exit "$i" 7 10
done
took=$(($(now_ms) - failed))
[ "$took" -le 2000 ] || fail "the job took $took ms to end on every host"
e2e_log "every host exited 7, $took ms after rank 3 failed"
expect_nothing_left
e2e_log PASS
