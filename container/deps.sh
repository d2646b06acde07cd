#!/bin/sh
# Installs every Debian package trainit's build, tests and benchmarks need.
# One list, used by the README, CI (.ci/run) and container/Dockerfile.
#   container/deps.sh           build + tests + benchmarks
#   container/deps.sh --build   only what building trainit needs
set -eu

BUILD="build-essential cmake pkg-config libfmt-dev nlohmann-json3-dev libsystemd-dev libsodium-dev"
TEST="googletest libgtest-dev libbenchmark-dev clang-format clang-tidy file util-linux procps iproute2
      python3 tini dumb-init catatonit openssh-server openssh-client openmpi-bin libopenmpi-dev"

packages="$BUILD"
[ "${1:-}" = "--build" ] || packages="$BUILD $TEST"

missing=""
for p in $packages; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps.sh: installing:$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # Packages install, services do not start (openssh-server would start the
  # machine's own sshd): the e2e tests start their own, in their namespaces.
  policy=/usr/sbin/policy-rc.d
  [ -e "$policy" ] || { printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && trap 'rm -f "$policy"' EXIT; }
  # shellcheck disable=SC2086
  apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
