#!/bin/bash
# fresh_runs.sh: one size of f32 allreduce (sum), in place, on N pinned
# ranks, RUNS times, each run a fresh set of processes: trainit
# (bench_coll --one … --in-place --pin, malloc'd buffers), then Open MPI in
# the same window (mpi_allreduce --in-place under mpirun, ranks bound to
# cores). A figure that depends on how a set of processes happened to start
# (its pages, its first waits) shows up here as a spread between runs, where
# one run's median hides it. Prints a markdown table: per run the median
# (p10–p90) of one call on rank 0, how rank 0's waits ended per call, Open
# MPI's median, their ratio; then min / median / max of each column.
#
#   bench/coll/fresh_runs.sh [--size BYTES] [--ranks N] [--runs K] [BUILD_DIR]
#     (defaults: 1 MiB, 2 ranks, 10 runs, build/release; builds bench_coll
#      and mpi_allreduce there, -j2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
size=1048576
ranks=2
runs=10
while (($# > 0)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    *) break ;;
  esac
done
build=$(cd "${1:-$root/build/release}" && pwd)

die() { echo "fresh_runs.sh: $*" >&2; exit 1; }

cmake --build "$build" --target bench_coll mpi_allreduce -j2 >/dev/null ||
  die "building bench_coll and mpi_allreduce in $build failed (is Open MPI's libopenmpi-dev installed?)"
bench_coll=$build/bench/coll/bench_coll
mpi=$build/bench/coll/mpi_allreduce
calls=$(((512 << 20) / size))
((calls < 7)) && calls=7
((calls > 20000)) && calls=20000

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "**allreduce f32 sum, $size bytes, in place, $ranks pinned ranks, $runs fresh runs** — \`bench/coll/fresh_runs.sh --size $size --ranks $ranks --runs $runs\` ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
echo "| run | trainit µs, median (p10–p90) | rank 0's waits per call: polled / yielded / slept | Open MPI µs | trainit ÷ Open MPI |"
echo "|---:|---:|---:|---:|---:|"
declare -a ours theirs ratios
for ((i = 1; i <= runs; i++)); do
  read -r _ _ med p10 p90 _ spun yielded slept < <("$bench_coll" --one "$size" --ranks "$ranks" --in-place --pin --calls "$calls") ||
    die "bench_coll --one failed"
  read -r _ ompi _ < <(mpirun --allow-run-as-root --bind-to core -np "$ranks" "$mpi" --in-place --budget $((512 << 20)) "$size") ||
    die "mpirun -np $ranks failed"
  ratio=$(awk -v a="$med" -v b="$ompi" 'BEGIN { printf "%.2f", a / b }')
  ours+=("$med")
  theirs+=("$ompi")
  ratios+=("$ratio")
  echo "| $i | $med ($p10–$p90) | $spun / $yielded / $slept | $ompi | $ratio |"
done
spread() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s / %s / %s", v[1], v[int((NR + 1) / 2)], v[NR] }'; }
echo "| min / median / max | $(spread "${ours[@]}") | | $(spread "${theirs[@]}") | $(spread "${ratios[@]}") |"
echo
echo "($(nproc) online CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load average at start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg); trainit $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'); $(mpirun --version 2>&1 | head -1); $calls calls timed per run after 10 warm-up calls)"
