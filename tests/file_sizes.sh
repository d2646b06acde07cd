#!/bin/sh
# The code stays in rooms of a readable size: no source file of src/ or
# init/ passes 700 lines, and the job runner (init/job/runner.cpp), the
# driver over the phases, passes neither 450 lines nor 15 fields.
#
#   file_sizes.sh SOURCE_DIR
set -u
root=$1
status=0
for f in $(find "$root/src" "$root/init" -name '*.cpp' -o -name '*.h' | sort); do
  n=$(wc -l < "$f")
  if [ "$n" -gt 700 ]; then
    echo "file_sizes: ${f#"$root"/} has $n lines (at most 700: split it by what it does)"
    status=1
  fi
done
runner=$root/init/job/runner.cpp
n=$(wc -l < "$runner")
if [ "$n" -gt 450 ]; then
  echo "file_sizes: init/job/runner.cpp has $n lines (at most 450: a feature lives in its phase)"
  status=1
fi
# The runner's fields: the names ending in '_' that the declarations of
# class JobRunner declare ("Type a_;", "Type a_, b_;", "Type a_ {};",
# "Type a_ = 0;").
fields=$(sed -n '/^class JobRunner {/,/^};/p' "$runner" | grep -E '^  [A-Za-z][^(]*[a-z0-9]_ *([,;=]|\{)' |
  grep -oE '[a-z0-9]_ *([,;=]|\{)' | wc -l)
if [ "$fields" -gt 15 ]; then
  echo "file_sizes: class JobRunner has $fields fields (at most 15: state belongs to the phase that uses it)"
  status=1
fi
[ "$status" -eq 0 ] && echo "file_sizes: every file of src/ and init/ within 700 lines; runner.cpp $n lines, $fields fields"
exit "$status"
