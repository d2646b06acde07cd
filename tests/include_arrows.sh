#!/bin/sh
# The include arrows of docs/architecture.md, checked on the includes: each
# folder of src/ includes only its own headers and those of the folders it may
# depend on, and nothing in src/ includes init/; in init/, exec/ includes
# nothing of job/ or cmd/, and job/ nothing of cmd/.
#
#   include_arrows.sh SOURCE_DIR
set -u
src=$1/src
status=0
allowed() {
  case $1 in
    base) echo "base" ;;
    loop) echo "loop base" ;;
    proc | log | notify | net) echo "$1 loop base" ;;
    os) echo "os base" ;;
    platform) echo "platform os base" ;;
    plan) echo "plan platform os base" ;;
    coll) echo "coll trainit" ;;  # trainit/: its public header, include/trainit/coll.h
    *) echo "" ;;
  esac
}
for dir in "$src"/*/; do
  folder=$(basename "$dir")
  ok=$(allowed "$folder")
  if [ -z "$ok" ]; then
    echo "include_arrows: src/$folder has no arrows in docs/architecture.md (add them there and to this script)"
    status=1
    continue
  fi
  # Every quoted include: "folder/header.h", or a bare "header.h" (init's form).
  grep -Hn '^#include "' "$dir"*.h "$dir"*.cpp 2>/dev/null | while IFS= read -r line; do
    target=$(printf '%s' "$line" | sed 's/.*#include "\([^"]*\)".*/\1/')
    case $target in
      */*) to=${target%%/*} ;;
      *) to="" ;;
    esac
    if [ -z "$to" ] || ! printf ' %s ' "$ok" | grep -q " $to "; then
      echo "include_arrows: ${line%%:#include*}: src/$folder may not include \"$target\""
      echo fail
    fi
  done
done | { out=$(cat); [ -z "$out" ] || { printf '%s\n' "$out" | grep -v '^fail$'; exit 1; }; } || status=1
# init/ by room: exec/ includes nothing of job/ or cmd/ (exec mode stays
# apart from the job modes), job/ nothing of cmd/.
for room in exec job; do
  case $room in
    exec) banned='job|cmd' ;;
    job) banned='cmd' ;;
  esac
  hits=$(grep -Hn -E "^#include \"($banned)/" "$1/init/$room/"*.h "$1/init/$room/"*.cpp 2>/dev/null)
  if [ -n "$hits" ]; then
    printf '%s\n' "$hits" | sed "s|^|include_arrows: init/$room may not include: |"
    status=1
  fi
done
exit $status
