#!/bin/sh
# Checks a systemd unit the way systemd would load it: `systemd-analyze
# verify`, where any message fails, not only the errors verify exits non-zero
# for (an unknown key or a value it cannot parse is only a warning to it).
#
#   systemd_unit.sh UNIT TRAINIT
#
# verify needs ExecStart='s binary to exist: the copy it checks, in a
# temporary directory, runs TRAINIT (the built binary) where UNIT names
# /usr/local/bin/trainit.
set -eu
unit=$1
case $2 in
  /*) trainit=$2 ;;
  *) trainit=$(pwd)/$2 ;;  # ExecStart= takes an absolute path
esac

if ! command -v systemd-analyze >/dev/null 2>&1; then
  echo "systemd-analyze not found: it is in Debian's systemd package (container/deps.sh)" >&2
  exit 1
fi
if ! grep -q '^ExecStart=/usr/local/bin/trainit ' "$unit"; then
  echo "$unit: no ExecStart=/usr/local/bin/trainit line to point at $trainit" >&2
  exit 1
fi

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|^ExecStart=/usr/local/bin/trainit |ExecStart=$trainit |" "$unit" >"$dir/train.service"

status=0
messages=$(cd "$dir" && systemd-analyze verify ./train.service 2>&1) || status=$?
if [ "$status" -ne 0 ] || [ -n "$messages" ]; then
  echo "systemd-analyze verify $unit (ExecStart= at $trainit) exited $status:" >&2
  echo "$messages" >&2
  exit 1
fi
echo "systemd-analyze verify: $unit loads without a message"
