#!/bin/bash
# fresh_runs.sh: one size of f32 allreduce (sum), in place, on N pinned
# ranks, RUNS times, each run a fresh set of processes: trainit
# (bench_coll --one … --in-place --pin, malloc'd buffers) beside Open MPI
# (mpi_allreduce --in-place under mpirun, ranks bound to cores). A figure
# that depends on how a set of processes happened to start (its pages, its
# first waits) shows up here as a spread between runs, where one run's
# median hides it.
#
# The two take turns (turns.h): both start, then this script hands the CPUs
# to one and then the other, 32 timed calls a turn, until each has made its
# calls. A VM's host moves its vCPUs between cores that share a cache and
# cores that do not every few hundred milliseconds; in turns of a few
# milliseconds both programs see the same cores, where one run after the
# other compares two machines. --apart runs them one after the other, as
# before: the difference between the two is the placement's share.
#
# Prints a markdown table: per run the median (p10–p90) of one call on rank
# 0, how rank 0's waits ended per call, Open MPI's median, their ratio, and
# in turns the median of the turns' ratios (each turn's median against
# Open MPI's turn beside it: where the cores moved during a run, the two
# runs' medians can each fall on another side of the move) and how many
# turns were within half Open MPI's; then min / median / max. --turn-log FILE appends
# every turn's figures there: "RUN TURN TRAINIT_US OPEN_MPI_US RATIO".
#
#   bench/coll/fresh_runs.sh [--size BYTES] [--ranks N] [--runs K] [--apart]
#                            [--turn-log FILE] [BUILD_DIR]
#     (defaults: 1 MiB, 2 ranks, 10 runs, in turns, build/release; builds
#      bench_coll and mpi_allreduce there, -j2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
size=1048576
ranks=2
runs=10
apart=0
turn_log=
while (($# > 0)); do
  case $1 in
    --size) size=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --apart) apart=1; shift ;;
    --turn-log) turn_log=$2; shift 2 ;;
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

turn_calls=32 # kTurnCalls in turns.h
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run in turns: prints bench_coll's line, then mpi_allreduce's, then a
# line a turn: the two programs' medians in it. The
# conductor (this shell) holds every FIFO open both ways, so no open blocks
# and a program that dies leaves a read that times out. The programs hold
# none of the conductor's ends: when it goes, their reads see the end of
# file and they exit.
in_turns() {
  local dir="$work/run$i" p r fd turn
  local -A fds
  mkdir -p "$dir/t" "$dir/m"
  for p in t m; do
    mkfifo "$dir/$p/done"
    exec {fd}<>"$dir/$p/done"
    fds[$p.done]=$fd
    for ((r = 0; r < ranks; r++)); do
      mkfifo "$dir/$p/go.$r"
      exec {fd}<>"$dir/$p/go.$r"
      fds[$p.$r]=$fd
    done
  done
  unheld() {
    for fd in "${fds[@]}"; do exec {fd}>&-; done
    exec "$@"
  }
  (unheld "$bench_coll" --one "$size" --ranks "$ranks" --in-place --pin --calls "$calls" --turns "$dir/t" >"$dir/t.out") &
  local ours=$!
  (unheld mpirun --allow-run-as-root --bind-to core -np "$ranks" "$mpi" --in-place --budget $((calls * size)) \
    --turns "$dir/m" "$size" >"$dir/m.out") &
  local theirs=$!
  # Every rank of program $1 ends its turn (or says it is ready) within $2 s.
  await() {
    read -r -N "$ranks" -t "$2" -u "${fds[$1.done]}" _ ||
      die "run $i: no end of a turn from $([[ $1 == t ]] && echo bench_coll || echo mpi_allreduce) within $2 s"
  }
  go() { for ((r = 0; r < ranks; r++)); do printf g >&"${fds[$1.$r]}"; done; }
  await t 30
  await m 60
  for ((turn = 0; turn < (calls + turn_calls - 1) / turn_calls; turn++)); do
    go t
    await t 30
    go m
    await m 30
  done
  go t
  go m
  wait "$ours" || die "bench_coll --one --turns failed"
  wait "$theirs" || die "mpirun -np $ranks mpi_allreduce --turns failed"
  for fd in "${fds[@]}"; do exec {fd}>&-; done
  cat "$dir/t.out" "$dir/m.out"
  paste -d' ' "$dir/t/medians" "$dir/m/medians"
}

apart() {
  "$bench_coll" --one "$size" --ranks "$ranks" --in-place --pin --calls "$calls" || die "bench_coll --one failed"
  mpirun --allow-run-as-root --bind-to core -np "$ranks" "$mpi" --in-place --budget $((calls * size)) "$size" ||
    die "mpirun -np $ranks failed"
}

how=in_turns
way="in turns of $turn_calls calls"
if ((apart)); then
  how=apart
  way="one after the other"
fi
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
echo "**allreduce f32 sum, $size bytes, in place, $ranks pinned ranks, $runs fresh runs, $way** — \`bench/coll/fresh_runs.sh --size $size --ranks $ranks --runs $runs$( ((apart)) && echo ' --apart')\` ($(date -u '+%Y-%m-%d %H:%M UTC'))"
echo
if ((apart)); then
  echo "| run | trainit µs, median (p10–p90) | rank 0's waits per call: polled / yielded / slept | Open MPI µs | trainit ÷ Open MPI |"
  echo "|---:|---:|---:|---:|---:|"
else
  echo "| run | trainit µs, median (p10–p90) | rank 0's waits per call: polled / yielded / slept | Open MPI µs | trainit ÷ Open MPI | the turns' ratios, median | turns at ≤ 0.5× |"
  echo "|---:|---:|---:|---:|---:|---:|---:|"
fi
declare -a ours theirs ratios paired
for ((i = 1; i <= runs; i++)); do
  out=$work/run$i.out
  $how >"$out"
  {
    read -r _ _ med p10 p90 _ spun yielded slept
    read -r _ ompi _
  } <"$out" || die "run $i gave no figures"
  ratio=$(awk -v a="$med" -v b="$ompi" 'BEGIN { printf "%.3f", a / b }')
  ours+=("$med")
  theirs+=("$ompi")
  ratios+=("$ratio")
  if ((apart)); then
    echo "| $i | $med ($p10–$p90) | $spun / $yielded / $slept | $ompi | $ratio |"
    continue
  fi
  turns_met=$(awk 'NR > 2 { n++; ok += $1 <= 0.5 * $2 } END { printf "%d of %d", ok, n }' "$out")
  turns_ratio=$(awk 'NR > 2 { printf "%.3f\n", $1 / $2 }' "$out" | sort -g |
    awk '{ v[NR] = $1 } END { printf "%.3f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
  paired+=("$turns_ratio")
  echo "| $i | $med ($p10–$p90) | $spun / $yielded / $slept | $ompi | $ratio | $turns_ratio | $turns_met |"
  if [[ -n $turn_log ]]; then
    awk -v run="$i" 'NR > 2 { printf "%d %d %s %s %.3f\n", run, NR - 2, $1, $2, $1 / $2 }' "$out" >>"$turn_log"
  fi
done
spread() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%s / %s / %s", v[1], v[int((NR + 1) / 2)], v[NR] }'; }
if ((apart)); then
  echo "| min / median / max | $(spread "${ours[@]}") | | $(spread "${theirs[@]}") | $(spread "${ratios[@]}") |"
else
  echo "| min / median / max | $(spread "${ours[@]}") | | $(spread "${theirs[@]}") | $(spread "${ratios[@]}") | $(spread "${paired[@]}") | |"
fi
echo
echo "($(nproc) online CPUs, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1); load average at start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg); trainit $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?'); $(mpirun --version 2>&1 | head -1); $calls calls timed per run after 10 warm-up calls$( ((apart)) || echo ", and $turn_calls timed after 2 warm-up calls a turn"))"
