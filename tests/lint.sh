#!/bin/sh
# The code passes the root's .clang-format and .clang-tidy.
#   tests/lint.sh format SOURCE_DIR
#   tests/lint.sh tidy SOURCE_DIR BUILD_DIR   (BUILD_DIR holds compile_commands.json)
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
    # shellcheck disable=SC2086
    echo "$sources" | xargs -P "$(nproc)" -n 1 clang-tidy -p "$3" --quiet 2>&1 |
      grep -v -E '^[0-9]+ warnings? generated\.$|^Suppressed [0-9]+ warnings|^Use -header-filter|^$' > "$3/clang-tidy.log" || true
    if [ -s "$3/clang-tidy.log" ]; then
      cat "$3/clang-tidy.log"
      exit 1
    fi
    echo "clang-tidy: $(echo "$sources" | wc -w) files clean"
    ;;
  *) echo "usage: $0 format|tidy SOURCE_DIR [BUILD_DIR]" >&2; exit 64 ;;
esac
