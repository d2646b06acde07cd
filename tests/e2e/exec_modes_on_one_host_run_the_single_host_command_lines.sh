#!/bin/bash
# One host (MA_NUM_HOSTS=1), with stand-ins that record their argv and
# environment: --mode torchrun-exec runs `torchrun --standalone --nnodes=1
# --nproc_per_node=N $MA_EXTRA_TORCHRUN_PARAMS ...`; --mode msrun-exec runs
# msrun with the loopback scheduler, MA_MOUNT_PATH's log dir, the default
# timeout and, with MS_RANKTABLE_ENABLE=True, --rank_table_file;
# --mode pytorch appends only --init_method tcp://<host 0's name>:<port>
# (--master-port honoured); --mode tensorflow without TF_*_HOSTS appends
# nothing and sets no TF_CONFIG.
source "$(dirname "$0")/cluster.sh"
cluster_up 1
rec="$E2E_DIR/rec"
mkdir -p "$rec" "$E2E_DIR/h0/ma/log"
chmod 0777 "$rec"
for tool in torchrun msrun train.py; do
  ln -s record_argv.py "$E2E_DIR/bin/$tool"
done
ascend_tables
run_one() {
  rm -f "$rec"/*
  host_start 0 RECORD_DIR="$rec" "RECORD_VARS=TF_CONFIG" "$@"
  expect_exit 0 0 60
}
expect_argv() {  # FILE then the expected words
  local file=$1
  shift
  [ -f "$rec/$file" ] || fail "no $file; recorded: $(ls "$rec" | tr '\n' ' ')"
  [ "$(cat "$rec/$file")" = "$(printf '%s\n' "$@")" ] || fail "$file: got $(tr '\n' ' ' <"$rec/$file"), expected $*"
}

run_one MA_NUM_GPUS=8 MA_EXTRA_TORCHRUN_PARAMS="--max_restarts=2 --log_dir '/tmp/torch logs'" \
  -- --mode torchrun-exec -- train.py --lr 1
expect_argv torchrun-host0.argv --standalone --nnodes=1 --nproc_per_node=8 --max_restarts=2 --log_dir "/tmp/torch logs" \
  train.py --lr 1
expect_output 0 "[host 0] recorded torchrun-host0"

run_one MA_MOUNT_PATH="$E2E_DIR/h0/ma" MS_RANKTABLE_ENABLE=True RANK_TABLE_FILE="$E2E_DIR/h0/table" \
  -- --mode msrun-exec -- train.py
expect_argv msrun-host0.argv --worker_num=2 --local_worker_num=2 --master_addr=127.0.0.1 --node_rank=0 \
  --master_port=8118 --log_dir="$E2E_DIR/h0/ma/log" --join=True --cluster_time_out=600 \
  --rank_table_file="$E2E_DIR/h0/table/jobstart_hccl.json" train.py

run_one -- --mode pytorch --master-port 29600 -- "$E2E_DIR/bin/train.py" --epochs 1
expect_argv train.py-host0.argv --epochs 1 --init_method "tcp://$(peer_name 0):29600"

run_one -- --mode tensorflow -- "$E2E_DIR/bin/train.py" --epochs 1
expect_argv train.py-host0.argv --epochs 1
grep -qxF "TF_CONFIG unset" "$rec/train.py-host0.env" || fail "a TF_CONFIG on one host: $(cat "$rec/train.py-host0.env")"
expect_nothing_left
e2e_log PASS
