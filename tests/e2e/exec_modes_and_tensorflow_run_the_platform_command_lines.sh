#!/bin/bash
# 2 hosts, with stand-ins that record their argv and environment: --mode
# torchrun-exec runs the platform's multi-host torchrun command line,
# --mode msrun-exec its msrun command line, --mode tensorflow the script with
# --task_index --ps_hosts --worker_hosts --job_name and a TF_CONFIG; each
# exactly as docs/contract.md §3 writes them.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
rec="$E2E_DIR/rec"
mkdir -p "$rec"
chmod 0777 "$rec"
for tool in torchrun msrun tf_train.py; do
  ln -s record_argv.py "$E2E_DIR/bin/$tool"
done
h0=$(peer_name 0)
run_both() {
  local i
  for i in 0 1; do
    host_start "$i" RECORD_DIR="$rec" "RECORD_VARS=TF_CONFIG MA_EXTRA_TORCHRUN_PARAMS" "$@"
  done
  for i in 0 1; do
    expect_exit "$i" 0 60
  done
}
expect_argv() {  # FILE then the expected words
  local file=$1
  shift
  [ "$(cat "$rec/$file")" = "$(printf '%s\n' "$@")" ] || fail "$file: got $(tr '\n' ' ' <"$rec/$file"), expected $*"
}

run_both MA_EXTRA_TORCHRUN_PARAMS="--rdzv_conf=timeout=7200 --max_restarts=3" -- --mode torchrun-exec -- train.py --lr 1
for i in 0 1; do
  expect_argv "torchrun-host$i.argv" --nnodes=2 --nproc_per_node=2 --node_rank=$i --master_addr="$h0" --master_port=18888 \
    --rdzv_id="$E2E_VJ" --rdzv_backend=static --rdzv_conf=timeout=7200 --max_restarts=3 train.py --lr 1
done

run_both MSRUN_CLUSTER_TIME_OUT=900 -- --mode msrun-exec -- train.py
for i in 0 1; do
  expect_argv "msrun-host$i.argv" --worker_num=4 --local_worker_num=2 --master_addr="$(host_ip 0)" --node_rank=$i \
    --master_port=8118 --log_dir=/tmp/log --join=True --cluster_time_out=900 train.py
done

ps=ps-0.$E2E_VJ:5000
workers=$(peer_name 0):5001,$(peer_name 1):5001
run_both TF_PS_HOSTS="$ps" TF_WORKER_HOSTS="$workers" -- --mode tensorflow -- "$E2E_DIR/bin/tf_train.py" --epochs 1
for i in 0 1; do
  expect_argv "tf_train.py-host$i.argv" --epochs 1 --task_index $i --ps_hosts "$ps" --worker_hosts "$workers" --job_name worker
  grep -qxF "TF_CONFIG={\"cluster\":{\"ps\":[\"$ps\"],\"worker\":[\"$(peer_name 0):5001\",\"$(peer_name 1):5001\"]},\"task\":{\"type\":\"worker\",\"index\":$i}}" \
    "$rec/tf_train.py-host$i.env" || fail "host $i's TF_CONFIG: $(cat "$rec/tf_train.py-host$i.env")"
done
expect_nothing_left
e2e_log PASS
