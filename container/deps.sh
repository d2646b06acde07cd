#!/bin/sh
# Installs every Debian package trainit's build, tests and benchmarks need.
# One list, used by the README, CI (.ci/run) and container/Dockerfile.
#   container/deps.sh           build + tests + fuzzers + benchmarks + demo, x86-64 and aarch64
#   container/deps.sh demo      only what `cmake --workflow --preset demo` needs:
#                               building the trainit binary (Ninja) and running
#                               the demo job (unshare)
#   container/deps.sh --build   only what building trainit needs
#   container/deps.sh --cross   only what building the aarch64 trainit needs
#
# The aarch64 build (cmake --workflow --preset aarch64) uses Debian's cross
# toolchain and multiarch: the arm64 architecture is added to dpkg once, and
# the arm64 libraries install beside the host's. Its tests run under
# qemu-user; nothing is registered with binfmt_misc.
set -eu

BUILD="build-essential cmake ninja-build pkg-config libfmt-dev nlohmann-json3-dev libsystemd-dev libsodium-dev libcap-dev"
# The demo preset builds the trainit binary alone (libsystemd-dev is for a
# test helper only), with Ninja, which picks its job count from the machine's
# cores (a CMake build preset can only fix one); unshare runs the demo.
DEMO="build-essential cmake pkg-config libfmt-dev nlohmann-json3-dev libsodium-dev libcap-dev ninja-build util-linux"
TEST="googletest libgtest-dev libbenchmark-dev clang-format clang-tidy file util-linux procps iproute2
      python3 python3-dev python3-torch python3-numpy tini dumb-init catatonit openssh-server openssh-client openmpi-bin
      libopenmpi-dev systemd"
# The fuzz and asan presets: clang, and its libFuzzer and sanitizer runtimes
# (which clang only recommends, and --no-install-recommends leaves out), built
# by Ninja.
FUZZ="clang libclang-rt-14-dev ninja-build"
CROSS="make cmake pkg-config nlohmann-json3-dev g++-aarch64-linux-gnu libfmt-dev:arm64 libsodium-dev:arm64 libcap-dev:arm64"
CROSS_TEST="build-essential qemu-user-static libgtest-dev:arm64 libsystemd-dev:arm64"

case "${1:-}" in
  demo) packages="$DEMO" ;;
  --build) packages="$BUILD" ;;
  --cross) packages="$CROSS" ;;
  "") packages="$BUILD $TEST $FUZZ $CROSS $CROSS_TEST $DEMO" ;;
  *) echo "usage: $0 [demo | --build | --cross]" >&2; exit 64 ;;
esac

missing=""
for p in $packages; do
  case " $missing " in *" $p "*) continue ;; esac  # listed twice (full set)
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps.sh: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  case "$missing" in
    *:arm64*)
      dpkg --print-foreign-architectures | grep -qx arm64 || dpkg --add-architecture arm64 ;;
  esac
  apt-get update -qq
  # Packages install, services do not start (openssh-server would start the
  # machine's own sshd): the e2e tests start their own, in their namespaces.
  policy=/usr/sbin/policy-rc.d
  [ -e "$policy" ] || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && trap 'rm -f "$policy"' EXIT; }
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
