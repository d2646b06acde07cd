#!/bin/sh
# The README's demo: trainit as PID 1 of a new PID namespace (what a container
# gives it) runs a small Ascend-style job: it waits for the rank table (written
# "initializing" first, "completed" a second later, as the platform does),
# starts one worker per device with its rank environment, relays their output
# with a [rank N] prefix into per-rank log files, and exits with the job's code.
# Usage: container/demo/run.sh [path/to/trainit]
set -u
here=$(cd "$(dirname "$0")" && pwd)
trainit=${1:-}
[ -n "$trainit" ] || trainit=$here/../../build/release/init/trainit  # the demo's and the tests' build
[ -x "$trainit" ] || { echo "demo: no trainit binary at $trainit (build it first: cmake --workflow --preset demo)" >&2; exit 1; }
# The namespaces first, on their own: a failure here is unshare's, not the
# job's, and is said as such.
if ! why=$(unshare --pid --fork --mount-proc --kill-child true 2>&1); then
  echo "demo: unshare cannot create the PID and mount namespaces trainit runs in: ${why:-exit $?}" >&2
  echo "demo: it needs root (or a container run with --privileged) and a root directory that is a mount point" >&2
  echo "demo: (in a chroot, bind-mount the chroot onto itself first: mount --bind DIR DIR)" >&2
  exit 1
fi
work=$(mktemp -d /tmp/trainit-demo.XXXXXX)
mkdir -p "$work/config" "$work/modelarts/log"
sed 's/"completed"/"initializing"/' "$here/ascend/jobstart_hccl.json" > "$work/config/jobstart_hccl.json"
( sleep 1; cp "$here/ascend/jobstart_hccl.json" "$work/config/.next.json" &&
  mv "$work/config/.next.json" "$work/config/jobstart_hccl.json" ) &

echo "== trainit $("$trainit" --version | cut -d' ' -f3) as PID 1, Ascend rank-table launch of worker.sh (4 devices)"
env -i PATH="$PATH" MA_VJ_NAME=ma-job-demo MA_CURRENT_HOST_IP=10.0.0.1 \
  MA_CURRENT_INSTANCE_NAME=ma-job-demo-worker-0 MA_NUM_HOSTS=1 MA_NUM_GPUS=4 \
  RANK_TABLE_FILE="$work/config" MA_MOUNT_PATH="$work/modelarts" \
  unshare --pid --fork --mount-proc --kill-child \
  "$trainit" --status-file "$work/status.json" -- "$here/ascend/worker.sh"
code=$?
wait
echo "== trainit exited with $code"
for log in "$work/modelarts/log"/*.txt; do
  [ -f "$log" ] || { echo "== no per-rank log file in $work/modelarts/log"; break; }
  echo "== per-rank log file ${log#"$work"/}:"
  cat "$log"
done
if [ -f "$work/status.json" ]; then
  echo "== status file (trainit status reads it):"
  cat "$work/status.json"
else
  echo "== no status file: trainit did not get as far as writing one"
fi
rm -rf "$work"
[ "$code" -eq 0 ]
