# What the fault matrix's e2e scenarios assert once a host's trainit ended,
# sourced after cluster.sh (bash). Not a scenario itself: the e2e glob takes
# *.sh only.
#
#   expect_status I CODE [PART...]  host I's status file ($E2E_DIR/hI/status.json)
#                                   is whole JSON of schema v1, in state "exit"
#                                   with exit_code CODE; its cause holds each
#                                   PART (the parts that stay true however much
#                                   detail the cause gains); no temporary file
#                                   of it is left beside it
#   expect_found_nothing_left I     host I's trainit (PID 1 of its namespace)
#                                   exited by its own last transition, with no
#                                   child left: as PID 1 that is its whole
#                                   namespace (what an earlier exit left, the
#                                   kernel would have killed unseen)

expect_status() {
  local i=$1 code=$2
  shift 2
  python3 - "$E2E_DIR/h$i/status.json" "$code" "$@" <<'PY' || fail "host $i's status file"
import json, os, sys
path, code, parts = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
text = open(path).read()
try:
    status = json.loads(text)
except ValueError:
    sys.exit(f"not whole JSON: {text!r}")
problems = []
if status.get("schema") != "trainit.status/v1":
    problems.append(f"schema {status.get('schema')!r}")
if status.get("state") != "exit":
    problems.append(f"state {status.get('state')!r}")
if status.get("exit_code") != code:
    problems.append(f"exit_code {status.get('exit_code')!r}, expected {code}")
cause = status.get("cause") or ""
problems += [f"the cause {cause!r} lacks {part!r}" for part in parts if part not in cause]
directory, name = os.path.split(path)
problems += [f"{left} left beside it" for left in os.listdir(directory) if left != name and left.startswith(name)]
if problems:
    sys.exit("; ".join(problems) + "\n" + text)
PY
}

expect_found_nothing_left() {
  local last
  last=$(grep -F ' -> exit after ' "$E2E_DIR/h$1/out" | tail -n 1)
  case "$last" in
    *"reaping -> exit after "*"no process is left"*) ;;
    *) fail "host $1's trainit did not end with nothing left: '$last'" ;;
  esac
}
