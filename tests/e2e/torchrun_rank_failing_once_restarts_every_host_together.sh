#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun --restart on-failure --max-restarts 1:
# rank 3 (host 1) exits 3 in the first start; both hosts stop their ranks,
# meet at the barrier again and start generation 1 together
# (TORCHELASTIC_RESTART_COUNT=1 on every rank), which ends well: every host
# exits 0, nothing is left running.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
marks="$E2E_DIR/marks"
mkdir -p "$marks"
cat >"$E2E_DIR/bin/restart_rank.sh" <<RANK
#!/bin/sh
touch "$marks/start.\$RANK.\$TORCHELASTIC_RESTART_COUNT"
if [ "\$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  if [ "\$RANK" = 3 ]; then sleep 0.5; exit 3; fi
  sleep 30
fi
sleep 0.3
RANK
chmod 0755 "$E2E_DIR/bin/restart_rank.sh"
for i in 0 1; do
  host_start "$i" -- --mode torchrun --restart on-failure --max-restarts 1 --grace 5 -- restart_rank.sh
done
for i in 0 1; do
  expect_exit "$i" 0 60
done
for rank in 0 1 2 3; do
  for gen in 0 1; do
    [ -e "$marks/start.$rank.$gen" ] || fail "rank $rank did not start in generation $gen: $(ls "$marks")"
  done
done
[ ! -e "$marks/start.0.2" ] || fail "a third start"
expect_output 0 "restarting the job (restart 1)"
expect_output 1 "restarting the job (restart 1 of 1)"
expect_nothing_left
e2e_log PASS
