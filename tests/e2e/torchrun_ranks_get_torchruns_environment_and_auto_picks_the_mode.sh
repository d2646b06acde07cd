#!/bin/bash
# --mode auto with MA_RUN_METHOD=torchrun is the torchrun mode. 2 hosts × 2
# ranks, a stand-in that records its argv and environment: every rank gets
# exactly torchrun's per-worker variables for a static rendezvous (RANK,
# LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_*, ROLE_*, MASTER_ADDR =
# host 0's platform name, MASTER_PORT = MA_TORCHRUN_MASTER_PORT,
# TORCHELASTIC_*, OMP_NUM_THREADS=1) and no TORCHELASTIC_USE_AGENT_STORE; its
# console lines carry "[rank N] ". Then one host alone (MA_NUM_HOSTS=1,
# --nproc-per-node 3, OMP_NUM_THREADS set): MASTER_ADDR=127.0.0.1, the
# default port 18888, three ranks, the user's OMP_NUM_THREADS kept.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
rec="$E2E_DIR/rec"
mkdir -p "$rec"
chmod 0777 "$rec"
ln -s record_argv.py "$E2E_DIR/bin/train.py"
vars="RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE ROLE_RANK ROLE_WORLD_SIZE ROLE_NAME
      MASTER_ADDR MASTER_PORT TORCHELASTIC_RESTART_COUNT TORCHELASTIC_MAX_RESTARTS TORCHELASTIC_RUN_ID OMP_NUM_THREADS
      TORCHELASTIC_USE_AGENT_STORE"
expect_file() {  # FILE then its expected lines
  local file=$1
  shift
  [ -f "$rec/$file" ] || fail "no $file; recorded: $(ls "$rec" | tr '\n' ' ')"
  [ "$(cat "$rec/$file")" = "$(printf '%s\n' "$@")" ] ||
    fail "$file: got $(tr '\n' ' ' <"$rec/$file"), expected $*"
}
# expect_rank HOST RANK LOCAL WORLD LOCAL_WORLD HOSTS MASTER PORT OMP
expect_rank() {
  expect_file "train.py-host$1-RANK$2.argv" --lr 1
  expect_file "train.py-host$1-RANK$2.env" RANK="$2" LOCAL_RANK="$3" WORLD_SIZE="$4" LOCAL_WORLD_SIZE="$5" \
    GROUP_RANK="$1" GROUP_WORLD_SIZE="$6" ROLE_RANK="$2" ROLE_WORLD_SIZE="$4" ROLE_NAME=default MASTER_ADDR="$7" \
    MASTER_PORT="$8" TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=0 TORCHELASTIC_RUN_ID="$E2E_VJ" \
    OMP_NUM_THREADS="$9" "TORCHELASTIC_USE_AGENT_STORE unset"
}

for i in 0 1; do
  host_start "$i" MA_RUN_METHOD=torchrun MA_TORCHRUN_MASTER_PORT=23456 RECORD_DIR="$rec" RECORD_KEY=RANK \
    "RECORD_VARS=$vars" -- --mode auto -- "$E2E_DIR/bin/train.py" --lr 1
done
for i in 0 1; do
  expect_exit "$i" 0 60
done
for rank in 0 1 2 3; do
  expect_rank $((rank / 2)) "$rank" $((rank % 2)) 4 2 2 "$(peer_name 0)" 23456 1
  expect_output $((rank / 2)) "[rank $rank] recorded train.py-host$((rank / 2))-RANK$rank"
done
[ "$(ls "$rec" | wc -l)" = 8 ] || fail "more ranks than 4: $(ls "$rec" | tr '\n' ' ')"
expect_nothing_left

rm -f "$rec"/*
host_start 0 MA_NUM_HOSTS=1 OMP_NUM_THREADS=4 RECORD_DIR="$rec" RECORD_KEY=RANK "RECORD_VARS=$vars" \
  -- --mode torchrun --nproc-per-node 3 -- "$E2E_DIR/bin/train.py" --lr 1
expect_exit 0 0 60
for rank in 0 1 2; do
  expect_rank 0 "$rank" "$rank" 3 3 1 127.0.0.1 18888 4
done
[ "$(ls "$rec" | wc -l)" = 6 ] || fail "more ranks than 3: $(ls "$rec" | tr '\n' ' ')"
expect_nothing_left
e2e_log PASS
