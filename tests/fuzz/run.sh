#!/bin/sh
# Runs one libFuzzer target for ctest (tests/fuzz/CMakeLists.txt).
#
#   run.sh fuzz   FUZZER TARGET SOURCE_DIR WORK_DIR SECONDS
#       fuzzes for SECONDS from SOURCE_DIR/corpus/TARGET (read only: new
#       inputs go to WORK_DIR/TARGET/corpus), then prints libFuzzer's final
#       stats: executions, executions per second, coverage.
#   run.sh replay FUZZER TARGET SOURCE_DIR WORK_DIR
#       runs every input of SOURCE_DIR/regressions/TARGET and of its corpus
#       once.
#
# A crash, a leak, a timeout (5 s for one input) or more than 2 GB of memory
# fails it: the input is kept under WORK_DIR/TARGET/artifacts/, and the last
# lines of libFuzzer's log say what happened.
set -u
mode=$1 fuzzer=$2 target=$3 src=$4 work=$5/$3
corpus=$src/corpus/$target
regressions=$src/regressions/$target
limits="-timeout=5 -rss_limit_mb=2048"
dict=
[ -f "$src/$target.dict" ] && dict=-dict=$src/$target.dict
mkdir -p "$work/artifacts"
log=$work/$mode.log

# The value of libFuzzer's final stat NAME in the log.
stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }

failed() {
  echo "fuzz.$target: $1 (exit $2); the end of $log:"
  tail -n 40 "$log"
  for artifact in "$work"/artifacts/*; do
    [ -e "$artifact" ] || continue
    echo "input: $artifact"
    echo "  run it again: $fuzzer $artifact"
    echo "  once fixed, keep it as a regression: cp $artifact $regressions/"
  done
  exit "$2"
}

case $mode in
  fuzz)
    seconds=$6
    rm -rf "$work/corpus" && mkdir -p "$work/corpus"
    # shellcheck disable=SC2086
    "$fuzzer" -max_total_time="$seconds" $limits -print_final_stats=1 -artifact_prefix="$work/artifacts/" $dict \
      "$work/corpus" "$corpus" >"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || failed "fuzzing found a problem" "$rc"
    execs=$(stat number_of_executed_units)
    rate=$(stat average_exec_per_sec)
    coverage=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed -E 's/.*(cov: [0-9]+ ft: [0-9]+ corp: [^ ]+).*/\1/')
    echo "fuzz.$target: $execs executions in ${seconds} s, $rate exec/s; $coverage;" \
      "$(find "$work/corpus" -type f | wc -l) new inputs in $work/corpus; peak RSS $(stat peak_rss_mb) MB"
    ;;
  replay)
    set --
    for dir in "$regressions" "$corpus"; do
      for input in "$dir"/*; do
        [ -f "$input" ] && set -- "$@" "$input"
      done
    done
    # shellcheck disable=SC2086
    "$fuzzer" $limits -artifact_prefix="$work/artifacts/" "$@" >"$log" 2>&1
    rc=$?
    [ "$rc" -eq 0 ] || failed "an input of regressions/ or corpus/ fails" "$rc"
    echo "fuzz.$target: $# inputs run once ($(find "$regressions" -type f 2>/dev/null | wc -l) regressions)," \
      "none fails"
    ;;
  *)
    echo "usage: $0 fuzz|replay FUZZER TARGET SOURCE_DIR WORK_DIR [SECONDS]" >&2
    exit 64
    ;;
esac
