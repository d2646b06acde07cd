#!/bin/bash
# compare.sh: allreduce of f32 (sum) among N = 2 and 4 ranks of this node,
# 4 B … 64 MiB, side by side in one run: trainit (bench_coll: ordinary and
# trainit_alloc buffers), Open MPI (mpi_allreduce.c under mpirun), PyTorch
# gloo (gloo_allreduce.py, Debian's /usr/bin/python3) and this machine's
# single-thread memcpy (memcpy_rate.c); then the Python module
# (py_allreduce.py: numpy f32, in place) beside the same calls from C. Median latency of one call as rank 0
# sees it (µs) and busbw = algbw · 2(N−1)/N (GB/s, nccl-tests' definition,
# algbw = bytes / time); memcpy: copy rate, bytes / time. Prints a markdown
# table with the command, the machine and the versions. About 1–2 minutes
# on 2 cores.
#
#   bench/coll/compare.sh [BUILD_DIR]     (default build/release; builds
#                                          bench_coll, mpi_allreduce,
#                                          memcpy_rate and the shared
#                                          library there, -j2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=$(cd "${1:-$root/build/release}" && pwd)
python=/usr/bin/python3
sizes=(4 64 1024 4096 65536 1048576 67108864)
ranks=(2 4)

die() { echo "compare.sh: $*" >&2; exit 1; }

cmake --build "$build" --target bench_coll mpi_allreduce memcpy_rate trainit_coll_shared -j2 >/dev/null ||
  die "building bench_coll, mpi_allreduce, memcpy_rate and trainit_coll_shared in $build failed (is Open MPI's libopenmpi-dev installed?)"
# The module's C part, where the build has it (python3-dev); the table says which path ran.
cmake --build "$build" --target trainit_coll_python_fast >/dev/null 2>&1 || true
bench_coll=$build/bench/coll/bench_coll
mpi=$build/bench/coll/mpi_allreduce
memcpy_rate=$build/bench/coll/memcpy_rate

human() {
  local b=$1
  if ((b >= 1048576)); then echo "$((b / 1048576)) MiB"; elif ((b >= 1024)); then echo "$((b / 1024)) KiB"; else echo "$b B"; fi
}

declare -A us    # us[tool,N,bytes]: median µs
declare -A iters # iters[tool,N,bytes]: calls timed
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)

# memcpy before and after the rest: the memory bandwidth other work leaves
# this run moves between them.
"$memcpy_rate" "${sizes[@]}" > "$out/memcpy_before"

# trainit: the existing bench (both N, both buffer kinds, powers of 4).
"$bench_coll" > "$out/trainit" || die "bench_coll failed"
grep -q '^ *size | *N=2 µs' "$out/trainit" || die "bench_coll's table is not in the format this script reads: $(head -5 "$out/trainit")"
for b in "${sizes[@]}"; do
  line=$(grep -E "^ *$(human "$b") \|" "$out/trainit") || die "bench_coll printed no row for $(human "$b")"
  read -r m2 a2 m4 a4 < <(echo "$line" | awk -F'|' '{split($2,x," "); split($3,y," "); split($4,z," "); split($5,w," "); print x[1], y[1], z[1], w[1]}')
  us[trainit,2,$b]=$m2; us[alloc,2,$b]=$a2; us[trainit,4,$b]=$m4; us[alloc,4,$b]=$a4
done
memcpy_bench_coll=$(sed -n 's/^single-thread memcpy, 64 MiB, same run: \([0-9.]*\) GB\/s.*/\1/p' "$out/trainit")

# Open MPI and gloo: the same sizes, warm-up, then calls timed one by one.
for n in "${ranks[@]}"; do
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$mpi" --budget $((256 << 20)) "${sizes[@]}" > "$out/mpi$n" ||
    die "mpirun -np $n failed"
  "$python" "$here/gloo_allreduce.py" -n "$n" --budget $((64 << 20)) --max-iters 2000 --seconds 2 "${sizes[@]}" > "$out/gloo$n" ||
    die "gloo_allreduce.py -n $n failed"
  for tool in mpi gloo; do
    while read -r b t k; do us[$tool,$n,$b]=$t; iters[$tool,$n,$b]=$k; done < "$out/$tool$n"
  done
done
"$memcpy_rate" "${sizes[@]}" > "$out/memcpy_after"

# The Python module beside C, 2 ranks, in place: numpy through
# comm.allreduce(a, out=a), the same call through bare ctypes (the least any
# ctypes binding costs), and bench_coll --one (C) in the same run.
py_sizes=(8 1048576)
declare -A py_module py_bare c_inplace
if "$python" -c 'import numpy' 2>/dev/null; then
  py_env=(TRAINIT_COLL_LIBRARY="$build/src/coll/libtrainit_coll.so" TRAINIT_COLL_PYTHON="$build/python")
  env "${py_env[@]}" "$python" "$here/py_allreduce.py" -n 2 "${py_sizes[@]}" > "$out/py2" ||
    die "py_allreduce.py -n 2 failed"
  py_path=$(env "${py_env[@]}" PYTHONPATH="$build/python" "$python" -c \
    'import trainit_coll as t; print("its C part, trainit_coll._fast" if t._fast else "ctypes alone (no trainit_coll._fast in this build)")')
  while read -r b m bare _ _; do py_module[$b]=$m; py_bare[$b]=$bare; done < "$out/py2"
  for b in "${py_sizes[@]}"; do
    read -r _ _ c_inplace[$b] _ < <("$bench_coll" --one "$b" --ranks 2 --in-place) || die "bench_coll --one $b failed"
  done
fi
declare -A copy_before copy_after
while read -r b _ g; do copy_before[$b]=$g; done < "$out/memcpy_before"
while read -r b _ g; do copy_after[$b]=$g; done < "$out/memcpy_after"
t_end=$(date +%s)
load_end=$(cut -d" " -f1-3 /proc/loadavg)

cell() {  # cell TOOL N BYTES: "µs / busbw"
  local t=${us[$1,$2,$3]:-}
  [[ -n $t ]] || { echo "—"; return; }
  awk -v t="$t" -v b="$3" -v n="$2" 'BEGIN { printf "%.2f / %.2f", t, b / (t * 1000) * 2 * (n - 1) / n }'
}
ratio() {  # how many times faster trainit is than TOOL
  awk -v a="${us[trainit,$2,$3]}" -v o="${us[$1,$2,$3]:-0}" 'BEGIN { if (o > 0) printf "%.1f×", o / a; else print "—" }'
}

cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
torch_version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo "not importable")
echo "**allreduce, f32 sum** — \`bench/coll/compare.sh${1:+ $1}\` ($(date -u '+%Y-%m-%d %H:%M UTC'), $((t_end - t_start)) s)"
echo
echo "- machine: $(nproc) online CPUs ($cpu), $mem, $(uname -sr); load average at start $load_start, at the end $load_end"
echo "- trainit $(git -C "$root" describe --always --dirty 2>/dev/null || echo '?') (bench_coll, $(basename "$(readlink -f "$build")") build); $(mpirun --version 2>&1 | head -1); PyTorch $torch_version gloo ($("$python" --version 2>&1)); $(cc --version | head -1)"
echo "- each cell: median µs of one call on rank 0 / busbw GB/s = bytes/time · 2(N−1)/N; memcpy: GB/s of one single-thread copy of that size"
echo "  (median), measured before / after the rest of the run;"
echo "  single-thread memcpy of 64 MiB as bench_coll measured it in the same run: ${memcpy_bench_coll:-?} GB/s"
echo "- calls timed per size: trainit clamp(512 MiB/size, 7, 20000); Open MPI clamp(256 MiB/size, 5, 20000); gloo clamp(64 MiB/size, 5, 2000) or fewer after 2 s"
for n in "${ranks[@]}"; do
  echo "  (gloo, N = $n: $(for b in "${sizes[@]}"; do printf '%s ' "${iters[gloo,$n,$b]}"; done)calls); 10 warm-up calls each (1 when ≤ 10 are timed; trainit: 1)"
done
echo
echo "| N | size | trainit | trainit, trainit_alloc buffers | Open MPI | PyTorch gloo | Open MPI ÷ trainit, time | gloo ÷ trainit, time | memcpy, 1 thread, GB/s |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${ranks[@]}"; do
  for b in "${sizes[@]}"; do
    c="${copy_before[$b]} / ${copy_after[$b]}"
    echo "| $n | $(human "$b") | $(cell trainit "$n" "$b") | $(cell alloc "$n" "$b") | $(cell mpi "$n" "$b") | $(cell gloo "$n" "$b") | $(ratio mpi "$n" "$b") | $(ratio gloo "$n" "$b") | $c |"
  done
done
if ((${#py_module[@]} > 0)); then
  echo
  echo "**From Python** (\`bench/coll/py_allreduce.py -n 2 ${py_sizes[*]}\`, numpy float32, \`comm.allreduce(a, out=a)\`; the module through $py_path), 2 ranks, same run; median µs of one call on rank 0:"
  echo
  echo "| size | C (\`bench_coll --one SIZE --in-place\`) | Python module | module − C | the same call through bare ctypes | module − bare ctypes |"
  echo "|---:|---:|---:|---:|---:|---:|"
  for b in "${py_sizes[@]}"; do
    echo "| $(human "$b") | ${c_inplace[$b]} | ${py_module[$b]} | $(awk -v m="${py_module[$b]}" -v c="${c_inplace[$b]}" 'BEGIN { printf "%.2f", m - c }') | ${py_bare[$b]} | $(awk -v m="${py_module[$b]}" -v c="${py_bare[$b]}" 'BEGIN { printf "%.2f", m - c }') |"
  done
fi
