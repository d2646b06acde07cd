#!/bin/bash
# gpu_bundle.sh: what `gpu_check.sh --prebuilt` needs, built here (a machine
# with the CUDA toolkit and the project's build dependencies, no GPU needed)
# and laid out as a build tree in one small directory, for a GPU machine that
# has only a driver:
#
#   bench/coll/gpu_bundle.sh [--variants] [BUNDLE_DIR]   (default build/gpu-bundle)
#   ... then, on the GPU machine, from a checkout of the same commit:
#   bench/coll/gpu_check.sh --prebuilt --mps [--variants] BUNDLE_DIR
#
# --variants: the experiment builds of the plugin's kernel too
# (libtrainit_coll_cuda_gpu_scope.so, _lean_threads.so, _no_step_fence.so: collective_kernel.cu
# says what each changes), which gpu_check.sh --variants checks and
# measures beside the plugin.
#
# It configures and builds the release preset's build tree (build/release:
# the static trainit, the CUDA plugin with its runtime linked in,
# gpu_allreduce with the static CUDA runtime, trainit-device-check and
# libtrainit_coll.so, and the Python module with its C part, _fast) and
# copies them into BUNDLE_DIR. Exit 0: built
# and copied (the last line says the bundle's size); 1: a step failed (the
# line says which).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
variants=()
if [ "${1:-}" = --variants ]; then
  variants=(trainit_coll_cuda_gpu_scope trainit_coll_cuda_lean_threads trainit_coll_cuda_no_step_fence)
  shift
fi
bundle=${1:-$root/build/gpu-bundle}
die() {
  echo "gpu_bundle.sh: $*" >&2
  exit 1
}

command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || die "no CUDA compiler (nvcc): the plugin cannot be built here"
build=$root/build/release
cmake --preset release -S "$root" >"$build.configure.log" 2>&1 ||
  die "configuring the release preset failed (see $build.configure.log)"
cmake --build "$build" --target trainit trainit_device_check trainit_coll_shared trainit_coll_cuda gpu_allreduce \
  trainit_python "${variants[@]}" -j"$(nproc)" >"$build.bundle.log" 2>&1 || die "building failed (see $build.bundle.log)"

files=(init/trainit init/trainit-device-check src/coll/libtrainit_coll.so src/coll/plugins/cuda/libtrainit_coll_cuda.so
  bench/coll/gpu_allreduce python/trainit_coll/__init__.py python/trainit_coll/torch.py)
# The Python module's C part, where this python3 could build it (3.11+ with
# its headers): without it the GPU machine's Python calls go through ctypes.
fast=python/trainit_coll/_fast.abi3.so
if [ -e "$build/$fast" ]; then
  files+=("$fast")
else
  echo "gpu_bundle.sh: warning: $fast was not built (python3-dev?): the bundle's module takes its ctypes path" >&2
fi
for v in "${variants[@]}"; do
  files+=("src/coll/plugins/cuda/lib$v.so")
done
# Only a directory this script made (or none) is replaced.
if [ -e "$bundle" ] && [ ! -e "$bundle/.gpu-bundle" ]; then
  die "$bundle exists and is not a bundle of this script's: name another directory"
fi
rm -rf "$bundle"
mkdir -p "$bundle"
touch "$bundle/.gpu-bundle"
for f in "${files[@]}"; do
  [ -e "$build/$f" ] || die "$build/$f was not built (is the CUDA toolkit found? see $build.configure.log)"
  mkdir -p "$bundle/$(dirname "$f")"
  cp -L "$build/$f" "$bundle/$f"
done
# The device check finds the library by its soname (a copy: no link to lose
# on the way).
cp "$bundle/src/coll/libtrainit_coll.so" "$bundle/src/coll/libtrainit_coll.so.0"
echo "gpu_bundle.sh: $bundle, $(du -sh "$bundle" | cut -f1), commit $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
