#!/bin/sh
# The code passes the root's .clang-format and .clang-tidy.
#   tests/lint.sh format SOURCE_DIR
#   tests/lint.sh tidy SOURCE_DIR BUILD_DIR   (BUILD_DIR holds compile_commands.json)
#
# clang-tidy runs every check of .clang-tidy on every file. Its static
# analyzer (clang-analyzer-*) explores paths in its "shallow" mode, as an
# IDE's analysis on build does: every checker over every function, callees
# followed less deep (75,000 nodes a function, small callees inlined), a
# quarter of the time of "deep" mode, which took 7.5 minutes of 2 cores alone
# on this tree. TRAINIT_TIDY_DEEP=1 runs the deep mode (docs/testing.md).
set -eu
what=$1
cd "$2"
files=$(git ls-files 'src/*.cpp' 'src/*.h' 'init/*.cpp' 'init/*.h' 'include/*.h' 'tests/*.cpp' 'tests/*.h' \
        'bench/*.cpp' 'bench/*.h' 'python/*.cpp' 2>/dev/null ||
        find $(ls -d src init include tests bench python 2>/dev/null) \( -name '*.cpp' -o -name '*.h' \) | sort)
case $what in
  format)
    # shellcheck disable=SC2086
    clang-format --dry-run --Werror $files
    echo "clang-format: $(echo "$files" | wc -w) files clean"
    ;;
  tidy)
    sources=$(echo "$files" | tr ' ' '\n' | grep -E '^(src|init|python)/.*\.cpp$')
    mode=shallow
    [ "${TRAINIT_TIDY_DEEP:-0}" = 1 ] && mode=deep
    # shellcheck disable=SC2086
    echo "$sources" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$3" --quiet \
      --extra-arg=-Xclang --extra-arg=-analyzer-config --extra-arg=-Xclang --extra-arg=mode=$mode 2>&1 |
      grep -v -E '^[0-9]+ warnings? generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$' > "$3/clang-tidy.log" || true
    if [ -s "$3/clang-tidy.log" ]; then
      cat "$3/clang-tidy.log"
      exit 1
    fi
    echo "clang-tidy: $(echo "$sources" | wc -w) files clean (static analyzer: $mode mode)"
    ;;
  *) echo "usage: $0 format|tidy SOURCE_DIR [BUILD_DIR]" >&2; exit 64 ;;
esac
