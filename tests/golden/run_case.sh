#!/bin/sh
# Runs one golden case of `trainit plan` and compares what it prints, byte for
# byte, with what the case expects.
#
#   run_case.sh [--emulator EMULATOR] TRAINIT CASE_DIR
#   run_case.sh --update [--emulator EMULATOR] TRAINIT CASE_DIR
#
# --emulator runs TRAINIT as `EMULATOR TRAINIT plan ...` (qemu-user, for the
# aarch64 build); a case it cannot run as written exits 77, a skip.
#
# A case directory holds:
#   env           NAME=VALUE lines: the whole environment (run under env -i)
#   args          the words after `trainit plan`, one per line
#   expected.out  expected stdout     (absent: empty)
#   expected.err  expected stderr     (absent: empty)
#   expected.rc   expected exit code  (absent: 0)
# and the rank tables and directories the case reads. In every file,
# @CASE@ stands for the case directory's absolute path; empty lines and
# lines starting with '#' in env and args are skipped.
#
# --update rewrites the expected files from what trainit printed (review the
# diff before committing it). Only the update_goldens target passes it: the
# tests ctest runs compare and never write.
set -u
update=
if [ "${1:-}" = --update ]; then
  update=1
  shift
fi
emulator=
if [ "${1:-}" = --emulator ]; then
  emulator=$2
  shift 2
fi
bin=$1
dir=$(cd "$2" && pwd) || exit 2
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM

pattern=$(printf '%s' "$dir" | sed 's/[][\\.*^$|]/\\&/g')
replacement=$(printf '%s' "$dir" | sed 's/[\\&|]/\\&/g')
expand() { sed "s|@CASE@|$replacement|g" "$1"; }
fold() { sed "s|$pattern|@CASE@|g"; }

# Build "NAME=VALUE... TRAINIT plan ARGS..." as the positional parameters.
set --
for part in env args; do
  if [ "$part" = args ]; then
    [ -z "$emulator" ] || set -- "$@" "$emulator"
    set -- "$@" "$bin" plan
  fi
  [ -f "$dir/$part" ] || continue
  expand "$dir/$part" >"$tmp/$part"
  if [ "$part" = env ] && [ -n "$emulator" ]; then
    # qemu-user rebuilds its program's environment as a list of names, newest
    # first: one entry per name, in reverse order. A case that repeats a name
    # cannot be given to trainit as written (exit 77: ctest's skip).
    repeated=$(grep -v -e '^$' -e '^#' "$tmp/env" | sed 's/=.*//' | sort | uniq -d | tr '\n' ' ')
    if [ -n "$repeated" ]; then
      echo "skipped under qemu-user: the environment repeats $repeated(qemu passes one entry per name)"
      exit 77
    fi
    # Reversed, trainit sees the case's order.
    sed -n '1!G;h;$p' "$tmp/env" >"$tmp/env.reversed"
    mv "$tmp/env.reversed" "$tmp/env"
  fi
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in '' | '#'*) continue ;; esac
    set -- "$@" "$line"
  done <"$tmp/$part"
done

# The plan shows the capability sets the job's processes would get, which are
# the machine's: every case runs with an empty bounding set (as root: the
# tests run as root), so that its plan reads the same on every machine.
setpriv --bounding-set -all --inh-caps -all -- env -i "$@" >"$tmp/raw.out" 2>"$tmp/raw.err"
echo $? >"$tmp/rc"
fold <"$tmp/raw.out" >"$tmp/out"
fold <"$tmp/raw.err" >"$tmp/err"

if [ -n "$update" ]; then
  cp "$tmp/out" "$dir/expected.out"
  if [ -s "$tmp/err" ]; then cp "$tmp/err" "$dir/expected.err"; else rm -f "$dir/expected.err"; fi
  if [ "$(cat "$tmp/rc")" != 0 ]; then cp "$tmp/rc" "$dir/expected.rc"; else rm -f "$dir/expected.rc"; fi
  echo "updated $dir"
  exit 0
fi

status=0
for what in out err rc; do
  expected="$dir/expected.$what"
  if [ ! -f "$expected" ]; then
    expected="$tmp/none.$what"
    if [ "$what" = rc ]; then echo 0 >"$expected"; else : >"$expected"; fi
  fi
  if ! cmp -s "$expected" "$tmp/$what"; then
    echo "golden: $what differs from $expected:"
    diff -u "$expected" "$tmp/$what" | head -n 80
    status=1
  fi
done
exit $status
