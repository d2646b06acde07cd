#!/bin/sh
# Stripped sizes of the static trainit, x86-64 and aarch64, beside Debian's
# tini-static for the same two architectures. Prints one table.
#
#   bench/size/run.sh [BUILD_ROOT]     (default: build, as the presets make it)
#
# Build first: cmake --workflow --preset test (or cmake --preset release &&
# cmake --build --preset release --target trainit) and
# cmake --workflow --preset aarch64 (or its build step, --target trainit).
# tini-static comes from Debian's tini package: amd64 from the machine
# (container/deps.sh installs it), arm64 fetched with `apt-get download
# tini:arm64` into a temporary directory (deps.sh adds the arm64
# architecture); a binary that is not there shows as "-".
set -eu
root=${1:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# size_of STRIP FILE: bytes of FILE once stripped, or "-".
size_of() {
  if [ -f "$2" ] && "$1" -o "$tmp/stripped" "$2" 2>/dev/null; then
    wc -c <"$tmp/stripped" | tr -d ' '
  else
    echo -
  fi
}

tini_arm64=-
if (cd "$tmp" && apt-get download -qq tini:arm64 >/dev/null 2>&1); then
  dpkg-deb -x "$tmp"/tini_*_arm64.deb "$tmp/tini-arm64"
  tini_arm64="$tmp/tini-arm64/usr/bin/tini-static"
fi
tini_version=$(dpkg-query -W -f='${Version}' tini 2>/dev/null || echo '?')

x86_trainit=$(size_of strip "$root/release/init/trainit")
arm_trainit=$(size_of aarch64-linux-gnu-strip "$root/aarch64/init/trainit")
x86_tini=$(size_of strip /usr/bin/tini-static)
arm_tini=$(size_of aarch64-linux-gnu-strip "$tini_arm64")

ratio() {
  case "$1$2" in *-*) echo - ;; *) awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }' ;; esac
}

echo "| stripped, bytes | x86-64 | aarch64 | aarch64 / x86-64 |"
echo "|---|---:|---:|---:|"
echo "| trainit (static, MinSizeRel) | $x86_trainit | $arm_trainit | $(ratio "$arm_trainit" "$x86_trainit") |"
echo "| tini-static (Debian $tini_version) | $x86_tini | $arm_tini | $(ratio "$arm_tini" "$x86_tini") |"
echo "| trainit / tini-static | $(ratio "$x86_trainit" "$x86_tini") | $(ratio "$arm_trainit" "$arm_tini") | |"
