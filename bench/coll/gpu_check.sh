#!/bin/bash
# gpu_check.sh: the CUDA backend on this node's NVIDIA GPU(s), in one run.
#
#  1. builds what it needs in its own build directory (CUDA on: the plugin
#     libtrainit_coll_cuda.so from src/coll/plugins/cuda, bench/coll/gpu_allreduce.cpp,
#     trainit, trainit-device-check, libtrainit_coll.so and the Python
#     module with its C part; tests off);
#  2. runs the CUDA backend's check with 2 and then 4 ranks sharing the
#     GPUs it finds (rank r on GPU r mod G): every collective, dtype and op,
#     in and out of place, in pieces, bitwise equal to the host
#     communicator's result; then a peer SIGKILLed mid-allreduce must give
#     the others -ECONNABORTED within a second;
#  3. prints one markdown table: device allreduce latency, synchronous and
#     back to back on a stream, and busbw (f32 sum, in place, N = 2 and 4)
#     for 4 B … 256 MiB beside cudaMemcpy device-to-device bandwidth of the
#     same sizes on GPU 0 (the physical limit line), with the floors
#     measured in the same run (one empty kernel launch and a stream
#     synchronize; one launch in which two processes swap a step through
#     IPC-mapped memory, and a synchronize); then
#     the same allreduce for a few settings of TRAINIT_COLL_DEVICE_BLOCKS,
#     TRAINIT_COLL_DEVICE_BLOCK_BYTES, TRAINIT_COLL_DEVICE_ONE_SHOT and
#     TRAINIT_COLL_DEVICE_STAGING, and one
#     driven from the host (TRAINIT_COLL_DEVICE_LAUNCH=0), 2 and 4 ranks
#     (gpu_allreduce sweep): what the defaults are tuned by;
#  4. where python3 has torch with a GPU: a trainit job of 2 Python ranks
#     (--mode torchrun, --preflight devices) that reduce CUDA tensors
#     through the trainit_coll module, checked element for element
#     (bench/coll/gpu_torch_rank.py), with its timings from Python; then
#     DDP on CUDA tensors over the torch.distributed backend "trainit"
#     against gloo (tests/python/torch_test.py);
#  5. there too: the same allreduce from torch.distributed on CUDA tensors
#     with 2 and 4 ranks, as same-run references and the Python column:
#     gloo, the "trainit" backend, and NCCL where every rank has a GPU of
#     its own (bench/coll/gloo_allreduce.py).
#
#   bench/coll/gpu_check.sh [--prebuilt] [--mps] [--quick] [--variants] [BUILD_DIR]   (default build/gpu)
#
# --prebuilt: build nothing; take the programs from BUILD_DIR, laid out as a
# build tree (a release build with CUDA has them all; bench/coll/gpu_bundle.sh
# copies just them into build/gpu-bundle): for a GPU node that has the driver
# but not the project's build dependencies.
# --mps: run the ranks under a CUDA MPS server of this script's own (its pipe
# and log directories private, stopped at the end). Where ranks share a GPU,
# the driver otherwise time-slices their contexts, which puts a floor of
# several hundred µs under every call; one rank per GPU needs no MPS.
# --variants: after step 3, each experiment build of the plugin's kernel
# that BUILD_DIR holds (src/coll/plugins/cuda/libtrainit_coll_cuda_*.so:
# gpu_bundle.sh --variants, or the targets of that name) through step 2's
# checks and step 3's table: what a change to the kernel would give, and
# whether it stays right, in the same run as the plugin. A variant that
# fails its check is named at the end, and the script exits 1.
# --quick: steps 2 and 3's table only (no sweep, no Python, no torch
# references): what a short loan of a GPU machine fits first.
#
# Needs: an NVIDIA GPU and its driver (nvidia-smi works), the CUDA toolkit
# (nvcc on PATH, in /usr/local/cuda/bin, or CUDACXX), cmake, a C++20
# compiler, and the project's build dependencies (libfmt-dev,
# nlohmann-json3-dev, libsystemd-dev, libcap-dev); with --prebuilt, only the
# GPU and its driver. Exit 0: built, checked and measured; 1: a step
# failed (the line says which; past steps 2 and 3's checks and table, the
# steps after a failed one still run, and the last line names every one
# that failed: a GPU machine's loan is short); 2: no GPU or driver here,
# nothing was run.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prebuilt=0
mps=0
quick=0
variants=0
while [ $# -gt 0 ]; do
  case $1 in
    --prebuilt) prebuilt=1 ;;
    --mps) mps=1 ;;
    --quick) quick=1 ;;
    --variants) variants=1 ;;
    *) break ;;
  esac
  shift
done
build=${1:-$root/build/gpu}

no_gpu() {
  echo "gpu_check.sh: no NVIDIA GPU or driver on $(hostname) ($1): nothing was built or run" >&2
  exit 2
}
die() {
  echo "gpu_check.sh: $*" >&2
  exit 1
}

command -v nvidia-smi >/dev/null 2>&1 || no_gpu "nvidia-smi not found"
gpus=$(nvidia-smi --query-gpu=index,name,compute_cap,memory.total,driver_version --format=csv,noheader 2>&1) ||
  no_gpu "nvidia-smi failed: $(echo "$gpus" | head -n 1)"
[ -n "$gpus" ] || no_gpu "nvidia-smi lists no GPU"

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ "$prebuilt" = 1 ] || [ -x "$nvcc" ] || die "no CUDA compiler (put the CUDA toolkit's bin on PATH, or set CUDACXX)"

echo "# gpu_check.sh on $(hostname), $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "GPUs (index, name, compute capability, memory, driver):"
while IFS= read -r line; do echo "  $line"; done <<<"$gpus"
echo "nvcc: $([ -x "$nvcc" ] && "$nvcc" --version | tail -n 1 || echo none); commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
# The plugin's kernels are built for compute capability 8.x and 9.x
# (src/coll/plugins/cuda/CMakeLists.txt): another GPU cannot run them.
while IFS=, read -r index name cap _; do
  case "${cap// /}" in
    8.* | 9.*) ;;
    *) echo "warning: GPU $index ($name) has compute capability ${cap// /}: the plugin's kernels are built for 8.x and 9.x only" >&2 ;;
  esac
done <<<"$gpus"

mkdir -p "$build" && build=$(cd "$build" && pwd) || die "cannot use $build as the build directory"
if [ "$prebuilt" = 0 ]; then
  echo "== building in $build"
  # MinSizeRel, as the release preset: GCC 12's -O3 warns falsely in trainit.
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=MinSizeRel -DTRAINIT_TESTS=OFF -DTRAINIT_BENCH=ON \
    -DTRAINIT_CUDA=ON -DCMAKE_CUDA_COMPILER="$nvcc" >"$build.configure.log" 2>&1 ||
    die "configuring $build failed (see $build.configure.log; are libfmt-dev and nlohmann-json3-dev installed?)"
  cmake --build "$build" --target trainit_coll_cuda gpu_allreduce trainit trainit_device_check trainit_coll_shared \
    trainit_python -j"$(nproc)" >"$build.build.log" 2>&1 ||
    die "building the plugin, gpu_allreduce, trainit and libtrainit_coll.so failed (see $build.build.log)"
else
  echo "== prebuilt programs from $build"
fi
plugin=$build/src/coll/plugins/cuda/libtrainit_coll_cuda.so
program=$build/bench/coll/gpu_allreduce
[ -f "$plugin" ] || die "the CUDA plugin was not built ($plugin missing: see $build.configure.log)"
[ -x "$program" ] || die "gpu_allreduce was not built (no CUDA toolkit found by CMake: see $build.configure.log)"

# The plugin by its path: no loader path to set up.
export TRAINIT_COLL_BACKEND=$plugin
# A call that hangs (a kernel waiting on a step that never comes) ends with
# -ETIMEDOUT, naming the call, instead of using up the machine's time; and
# every step below has a deadline of its own.
export TRAINIT_COLL_TIMEOUT=${TRAINIT_COLL_TIMEOUT:-30}

scratch=$(mktemp -d)
stop_mps() {
  if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || echo "gpu_check.sh: the MPS server did not stop" >&2
  fi
  rm -rf "$scratch"
}
trap stop_mps EXIT
if [ "$mps" = 1 ]; then
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || die "--mps: nvidia-cuda-mps-control not found"
  mkdir "$scratch/mps-pipe" "$scratch/mps-log"
  export CUDA_MPS_PIPE_DIRECTORY=$scratch/mps-pipe CUDA_MPS_LOG_DIRECTORY=$scratch/mps-log
  nvidia-cuda-mps-control -d || die "--mps: the MPS control daemon did not start"
  echo "== ranks under an MPS server of this script's own"
fi
for n in 2 4; do
  echo "== check, $n ranks"
  timeout 300 "$program" check "$n" ||
    die "the CUDA backend's check with $n ranks failed (the lines above say which call; 124: out of time)"
done

echo "== allreduce beside cudaMemcpy"
timeout 300 "$program" bench 2 4 || die "the bench failed (124: out of time)"

# Past the checks and the table, a step that fails is named here and the
# steps after it still run (a GPU machine's loan is short): the script
# exits 1 at the end, naming each.
failed=""
step_failed() {
  echo "gpu_check.sh: $1 failed (the lines above say why; 124: out of time); going on" >&2
  failed="$failed; $1"
}
verdict() {
  [ -z "$failed" ] || die "failed:${failed#;}"
}

if [ "$variants" = 1 ]; then
  found=0
  for variant in "$(dirname "$plugin")"/libtrainit_coll_cuda_*.so; do
    [ -f "$variant" ] || continue
    found=1
    name=$(basename "$variant" .so)
    name=${name#libtrainit_coll_cuda_}
    ok=1
    for n in 2 4; do
      echo "== variant $name: check, $n ranks"
      TRAINIT_COLL_BACKEND=$variant timeout 300 "$program" check "$n" || ok=0
    done
    if [ "$ok" = 1 ]; then
      echo "== variant $name: allreduce beside cudaMemcpy"
      TRAINIT_COLL_BACKEND=$variant timeout 300 "$program" bench 2 4 || ok=0
    fi
    [ "$ok" = 1 ] || step_failed "variant $name (not the plugin's)"
  done
  [ "$found" = 1 ] || echo "== --variants: $build holds no variant (bench/coll/gpu_bundle.sh --variants builds them)"
fi

if [ "$quick" = 1 ]; then
  verdict
  echo "== --quick: checked and measured; the sweep, the Python job and the torch references not run"
  exit 0
fi

for n in 2 4; do
  echo "== what the GPU is tuned by: blocks and the one-shot bound, $n ranks"
  timeout 300 "$program" sweep "$n" || step_failed "the sweep with $n ranks"
done

echo "== a trainit job of 2 Python ranks reducing CUDA tensors"
trainit=$build/init/trainit
library=$build/src/coll/libtrainit_coll.so
# The module as BUILD_DIR built it (python/trainit_coll with its C part,
# _fast), else the source's, which takes its ctypes path: 2–3 µs more a
# call (py_device_calls.py).
pymodule=$root/python
[ -f "$build/python/trainit_coll/__init__.py" ] && pymodule=$build/python
echo "the trainit_coll module: $pymodule ($(ls "$pymodule"/trainit_coll/_fast*.so >/dev/null 2>&1 && echo "with its C part" || echo "ctypes alone"))"
# The torch backend opens the plugin by name ("cuda"): beside the library
# where it is installed, else on the loader's path, where a build tree's is.
LD_LIBRARY_PATH=$(dirname "$plugin")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: python3 has no torch that sees a GPU"
elif [ ! -x "$trainit" ] || [ ! -f "$library" ]; then
  die "trainit or libtrainit_coll.so is missing from $build"
else
  job=$scratch/job
  mkdir "$job"
  # The device check beside trainit finds libtrainit_coll.so on this path
  # when the build tree was moved here (--prebuilt).
  (cd "$job" && LD_LIBRARY_PATH=$build/src/coll${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
    TRAINIT_COLL_LIBRARY=$library PYTHONPATH=$pymodule${PYTHONPATH:+:$PYTHONPATH} \
    timeout 300 "$trainit" --mode torchrun --nproc-per-node 2 --preflight devices \
    --device-check "$build/init/trainit-device-check" -- python3 "$here/gpu_torch_rank.py") ||
    step_failed "the trainit job of Python ranks"
  echo "== DDP on CUDA tensors over the torch.distributed backend \"trainit\", against gloo"
  if TRAINIT_COLL_LIBRARY=$library PYTHONPATH=$pymodule${PYTHONPATH:+:$PYTHONPATH} timeout 300 \
    python3 "$root/tests/python/torch_test.py" ddp_on_cuda_tensors_on_two_ranks_trains_to_the_same_parameters_as_gloo; then
    echo "passed"
  else
    step_failed "DDP on CUDA tensors over the trainit backend"
  fi
fi

echo "== the same calls from torch.distributed on CUDA tensors, same run (f32 sum in place; BYTES MEDIAN_US CALLS, rank 0)"
if ! python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "skipped: python3 has no torch that sees a GPU"
else
  count=$(wc -l <<<"$gpus")
  for n in 2 4; do
    for backend in gloo trainit nccl; do
      if [ "$backend" = nccl ] && [ "$count" -lt "$n" ]; then
        echo "-- nccl, $n ranks: skipped ($count GPU(s): NCCL takes one rank per GPU)"
        continue
      fi
      echo "-- $backend, $n ranks"
      TRAINIT_COLL_LIBRARY=$library PYTHONPATH=$pymodule${PYTHONPATH:+:$PYTHONPATH} timeout 600 \
        python3 "$here/gloo_allreduce.py" -n "$n" --backend "$backend" --device cuda --seconds 2 \
        8 1048576 16777216 268435456 || echo "($backend with $n ranks failed: the lines above say why)"
    done
  done
fi
verdict
