#!/bin/bash
# What a real trainit job spends relaying rank output, files + console (the
# only way a job relays: bench_logrelay measures the relay in-process, files
# only included). One host, `trainit --mode torchrun --nproc-per-node N
# --coll-arena off`, its console on /dev/null; each rank writes BYTES/N bytes
# of ~100-byte text lines to its stdout (`yes LINE | head -c`, so 8 KiB
# writes, as a block-buffered print does), then sleeps.
#
#   bench/logrelay/trainit.sh [TRAINIT_BINARY] [MiB] [RUNS]
#
# Once every rank's log file holds all its bytes (and the console writer has
# had 0.3 s to finish), trainit's own user + system CPU time is read from
# /proc/PID/stat (its threads only: the ranks are other processes), minus the
# same job's time with ranks that write nothing; CPU s/GB is that over the
# bytes relayed (1 GB = 10^9 bytes). Median [min–max] of RUNS, for 1 and 4
# ranks. /proc's times tick at CLK_TCK (100 Hz): 10 ms steps.
set -euo pipefail
trainit=${1:-build/release/init/trainit}
mib=${2:-1024}
runs=${3:-5}
tick=$(getconf CLK_TCK)
work=$(mktemp -d "${TMPDIR:-/tmp}/bench_logrelay_trainit-XXXXXX")
trap 'rm -rf "$work"' EXIT
line="step 1234 loss 0.1234 lr 1.00e-04 $(printf 'x%.0s' $(seq 1 64))"

# The CPU seconds trainit used, ranks writing `each` bytes apiece.
cpu_of_job() {
  local nproc=$1 each=$2
  rm -rf "$work/log" "$work/private"
  mkdir "$work/log"  # the job's log directory, as it exists under the mount
  env -i PATH=/usr/bin:/bin HOME="$work" MA_MOUNT_PATH="$work" \
    "$trainit" --mode torchrun --nproc-per-node "$nproc" --coll-arena off --private-dir "$work/private" \
    -- /bin/sh -c "yes '$line' | head -c $each; sleep 3" >/dev/null 2>&1 &
  local pid=$! deadline=$((SECONDS + 120)) done_ranks=0
  while ((done_ranks < nproc)); do
    ((SECONDS < deadline)) || { echo "trainit.sh: the ranks' logs never filled" >&2; exit 1; }
    sleep 0.05
    done_ranks=0
    for f in "$work"/log/*; do
      [[ -f $f && $(stat -c %s "$f") -ge $each ]] && done_ranks=$((done_ranks + 1))
    done
  done
  sleep 0.3
  # /proc/PID/stat after the command's parenthesised name: utime is field 14, stime 15.
  local stat
  stat=$(cat "/proc/$pid/stat")
  stat=${stat##*) }
  read -r -a f <<<"$stat"
  wait "$pid" || true
  echo "scale=4; (${f[11]} + ${f[12]}) / $tick" | bc
}

median_range() {
  sort -n | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2;
    printf "%.2f [%.2f–%.2f]", m, v[1], v[NR]}'
}

echo "trainit.sh: $("$trainit" --version 2>&1 | head -1); $mib MiB per case; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| ranks | trainit CPU s/GB, files + console (/dev/null) | trainit CPU s, quiet ranks |"
echo "|---:|---:|---:|"
total=$((mib << 20))
for nproc in 1 4; do
  each=$((total / nproc))
  per_gb=()
  idle=()
  for ((run = 0; run < runs; run++)); do
    base=$(cpu_of_job "$nproc" 0)
    busy=$(cpu_of_job "$nproc" "$each")
    idle+=("$base")
    per_gb+=("$(echo "scale=4; ($busy - $base) / ($total / 1000000000)" | bc)")
  done
  echo "| $nproc | $(printf '%s\n' "${per_gb[@]}" | median_range) | $(printf '%s\n' "${idle[@]}" | median_range) |"
done
