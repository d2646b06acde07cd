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
  # Every quoted include: "folder/header.h", or a bare "header.h" (init's
  # form). One awk a folder: a process an include cost seconds in forks.
  grep -Hn '^#include "' "$dir"*.h "$dir"*.cpp 2>/dev/null |
    awk -v ok=" $ok " -v folder="$folder" '{
      at = index($0, ":#include")
      target = $0; sub(/^[^"]*"/, "", target); sub(/".*$/, "", target)
      to = index(target, "/") ? substr(target, 1, index(target, "/") - 1) : ""
      if (to == "" || index(ok, " " to " ") == 0)
        print "include_arrows: " substr($0, 1, at - 1) ": src/" folder " may not include \"" target "\""
    }'
done | { out=$(cat); [ -z "$out" ] || { printf '%s\n' "$out"; exit 1; }; } || status=1
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
