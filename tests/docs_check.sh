#!/bin/sh
# The documentation stands alone:
#   1. every relative link of README.md and docs/**/*.md resolves: the file
#      or directory exists, and a #fragment names a heading of the page it
#      points into (GitHub's heading anchors);
#   2. README.md stays within 200 lines (the rest belongs under docs/);
#   3. no file of the repository outside docs/ (tracked, or new and not
#      ignored) cites one of the reference documents that live outside the
#      repository, or a path into the shared folder beside the checkout;
#   4. the README's two set-up commands (the lines starting with
#      ./container/deps.sh in its code blocks) are copied word for word
#      wherever docs/ and .ci/run give a command of the same start;
#   5. every path into the repository's own sources that README.md, docs/ or
#      a comment in the sources names (init/..., src/..., tests/..., with a
#      file's extension) exists: no statement about a file that is gone.
# Each finding is one line naming the file and line; exit 1 when there is one.
#
#   docs_check.sh SOURCE_DIR
set -u
root=${1:?usage: docs_check.sh SOURCE_DIR}
cd "$root" || exit 2

readme_max_lines=200
status=0
fail() {
  echo "docs_check: $*"
  status=1
}

# --- 2. The README's length --------------------------------------------------
lines=$(wc -l <README.md)
[ "$lines" -le "$readme_max_lines" ] ||
  fail "README.md: $lines lines, more than $readme_max_lines: move the detail into docs/"

# --- 1. Links ----------------------------------------------------------------
# Prints "LINE<TAB>TARGET" for each link of a Markdown file: inline links and
# images [text](target "title"), and reference definitions [id]: target.
# Fenced code blocks and `code spans` are not Markdown, so they are skipped.
links_of() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      if (match(line, /^[ \t]*\[[^]]+\]:[ \t]+[^ \t]+/)) {
        def = substr(line, RSTART, RLENGTH)
        sub(/^[ \t]*\[[^]]+\]:[ \t]+/, "", def)
        print NR "\t" def
      }
      while (match(line, /\]\([^)]*\)/)) {
        target = substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
        sub(/^[ \t]*</, "", target); sub(/>$/, "", target)
        sub(/[ \t].*$/, "", target)   # a title after the target
        if (target != "") print NR "\t" target
      }
    }' "$1"
}

# Prints the anchor of every heading of a Markdown file, as GitHub makes them:
# the heading text without its markup, lower-cased, punctuation dropped,
# spaces as "-"; a repeated anchor gets "-1", "-2", ...
anchors_of() {
  awk '
    /^[ \t]*(```|~~~)/ { fenced = !fenced; next }
    fenced || !/^#+[ \t]/ { next }
    {
      text = $0
      sub(/^#+[ \t]+/, "", text); sub(/[ \t]+#+[ \t]*$/, "", text)
      gsub(/`/, "", text)
      while (match(text, /\[[^]]*\]\([^)]*\)/)) {   # [text](url): its text
        link = substr(text, RSTART, RLENGTH)
        sub(/^\[/, "", link); sub(/\]\(.*$/, "", link)
        text = substr(text, 1, RSTART - 1) link substr(text, RSTART + RLENGTH)
      }
      text = tolower(text)
      # Punctuation and symbols GitHub drops, ASCII and the few others these
      # pages use; letters of any script are kept.
      gsub(/§|—|–|×|→|←|…|’|‘|“|”|«|»|·|≤|≥|÷|−/, "", text)
      gsub("[!\"#$%&\047()*+,./:;<=>?@^`{|}~]", "", text)
      gsub(/[][\\]/, "", text)
      gsub(/ /, "-", text)
      n = seen[text]++
      print (n ? text "-" n : text)
    }' "$1"
}

# Whether ANCHOR is a heading anchor of the Markdown file FILE.
has_anchor() {
  anchors_of "$1" | grep -qxF -- "$2"
}

check_links() {
  page=$1
  dir=$(dirname "$page")
  links_of "$page" | while IFS="$(printf '\t')" read -r line target; do
    case $target in
      [a-zA-Z]*:*) continue ;;  # a URL (https:, mailto:): not ours to resolve
    esac
    path=${target%%#*}
    fragment=
    case $target in *'#'*) fragment=${target#*#} ;; esac
    case $path in
      '') file=$page ;;
      /*) file=.$path ;;  # from the repository root, as GitHub reads it
      *) file=$dir/$path ;;
    esac
    if [ ! -e "$file" ]; then
      echo "$page:$line: $target: no such file ($file)"
      continue
    fi
    if [ -n "$fragment" ] && [ -f "$file" ]; then
      case $file in
        *.md)
          has_anchor "$file" "$fragment" ||
            echo "$page:$line: $target: $file has no heading with the anchor #$fragment"
          ;;
      esac
    fi
  done
}

pages=$(find docs -name '*.md' 2>/dev/null | sort)
broken=$(for page in README.md $pages; do check_links "$page"; done)
[ -z "$broken" ] || fail "links that do not resolve:
$broken"

# --- 3. Citations of what the repository does not hold -----------------------
# The names are put together here, so that this script does not cite them.
design=DESIGN
contract=CONTRACT
outside="($design|$contract)[.]md|[.][.]/shared"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard)
else
  files=$(find . -type f ! -path './.git/*' ! -path './build/*' | sed 's|^\./||')
fi
# One grep over every file (a grep a file cost seconds in forks).
citations=$(printf '%s\n' "$files" | grep -v -e '^docs/' -e '^$' | sort -u |
  while IFS= read -r file; do
    [ -f "$file" ] && printf '%s\0' "$file"
  done | xargs -0 -r grep -I -n -H -E "$outside" --)
[ -z "$citations" ] || fail "cites what is not in the repository (point at docs/ instead: docs/contract.md §N, docs/architecture.md):
$citations"

# --- 4. The README's two commands and their copies --------------------------
# The demo command starts "./container/deps.sh demo &&", the test command
# "./container/deps.sh &&" and runs the test workflow: any line of docs/ or
# .ci/run that does the same (after blanks and "if ! { ") must be the README's
# line itself. (Other commands that start with deps.sh are not copies.)
readme_command() { grep -m1 -E "^$1" README.md; }
demo_command=$(readme_command '\./container/deps\.sh demo &&')
test_command=$(readme_command '\./container/deps\.sh &&')
[ -n "$demo_command" ] && [ -n "$test_command" ] ||
  fail "README.md: no line starting ./container/deps.sh demo && and ./container/deps.sh && (the two set-up commands)"
drift=$(for file in $pages .ci/run; do
  [ -f "$file" ] || continue
  grep -n -E '^[[:space:]]*(if ! \{ )?\./container/deps\.sh (demo )?&&' "$file" | while IFS= read -r hit; do
    line=${hit%%:*}
    text=$(printf '%s' "${hit#*:}" | sed -E 's/^[[:space:]]*(if ! \{ )?//; s/; \}; then$//')
    case $text in
      "./container/deps.sh demo &&"*) want=$demo_command ;;
      *"--preset test "* | *"--preset test") want=$test_command ;;
      *) continue ;;
    esac
    [ "$text" = "$want" ] || echo "$file:$line: differs from the README's command: $text"
  done
done)
[ -z "$drift" ] || fail "copies of the README's commands that drifted:
$drift"

# --- 5. Paths to the sources that are gone ----------------------------------
# A path is a run of name characters starting with one of the source roots
# and ending in a file's extension; one with a wildcard or a placeholder
# (*, <, {, $) or a name in capitals (NAME_test.cpp) is a pattern, not a
# file, and is skipped.
roots='(init|src|tests|bench|container|include|cmake|python)'
exts='(h|hpp|c|cc|cpp|cu|sh|py|ld|txt|json|service|md|in|map|dict)'
sources=$(printf '%s\n' "$files" | grep -E '^(README[.]md|docs/.*[.]md|init/.*|src/.*|include/.*|tests/.*[.](h|cpp|c|sh|py|txt)|bench/.*[.](h|cpp|c|sh|py)|container/.*|\.ci/run|CMakeLists[.]txt)$' | sort -u)
# One grep over every file, awk to cut each hit to its path and drop the
# patterns, and only the shell's own test a path (no process a hit).
tab=$(printf '\t')
stale=$(for file in $sources; do
  [ -f "$file" ] && printf '%s\0' "$file"
done | xargs -0 -r grep -I -H -n -o -E "(^|[^A-Za-z0-9_./-])$roots/[A-Za-z0-9_./-]+[.]$exts([^A-Za-z0-9_]|$)" -- 2>/dev/null |
  awk '{
    # FILE:LINE:HIT (no tracked file has a colon in its name)
    file = $0; sub(/:.*/, "", file)
    rest = substr($0, length(file) + 2)
    line = rest; sub(/:.*/, "", line)
    path = substr(rest, length(line) + 2)
    sub(/^[^a-z]*/, "", path); sub(/[^A-Za-z0-9_]$/, "", path)
    if (path ~ /[*<{$]/ || path ~ /\/build\// || path ~ /^build\//) next
    # NAME_test.cpp, TARGET.dict: a placeholder in capitals
    if (path ~ /\/[A-Z][A-Z_]*[A-Z](_[a-z]+)?[.][a-z]+$/) next
    print file "\t" line "\t" path
  }' |
  while IFS="$tab" read -r file line path; do
    [ -e "$path" ] || echo "$file:$line: $path does not exist"
  done)
[ -z "$stale" ] || fail "paths to sources that do not exist:
$stale"

[ "$status" -ne 0 ] || echo "docs_check: README.md $lines lines, $(echo $pages | wc -w) pages under docs/: every link resolves, nothing cited from outside, the README's commands copied word for word, every source path named exists"
exit "$status"
