#!/bin/bash
# The fault matrix, signals on several hosts (docs/testing.md#the-fault-matrix):
# SIGTERM, SIGINT and SIGHUP to one host's trainit in each state that only a
# job of several hosts has, one cluster for every case:
#
#   ascend   resolve_peers (the peers' names never resolve), host_barrier on
#            host 0 (alone) and on host 1 (host 0 absent), running (2 hosts,
#            host 0 signalled), stopping (host 1's rank failed with 7, host
#            0's rank ignores SIGTERM)
#   torchrun restarting (host 1's rank failed, both hosts stop to start
#            generation 1; host 0's rank ignores SIGTERM and holds its stop)
#   mpi      start_sshd (ssh-keygen held), resolve_peers and wait_peers
#            (sshd up, the peer's name / sshd missing), host_barrier (the
#            peer's sshd port answers, the peer never checks in)
#
# After each: every host started exits with the documented code (128+S when
# the signal stopped the job — on the other hosts too —, the first cause's
# code in stopping, 0 when SIGHUP let a restart run), its status file parses
# and says `exit`, that code and a cause naming the signal (or the first
# cause), no rank is left `running`, the ranks trainit stopped handled its
# SIGTERM, no temporary file is left and every log ends with a whole line,
# and nothing runs in any host's namespace. SIGHUP is not a stop: before any
# rank runs it has nobody to reach and the host stays in its state (checked,
# then SIGTERM ends the case: the transition out of the state must be
# SIGTERM's); once ranks run it is forwarded to them.
source "$(dirname "$0")/cluster.sh"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"

# A rank: its id is RANK_ID (ascend) or RANK (torchrun). It marks
# MARKS/ready.ID, then waits; on SIGTERM it appends its id to MARKS/stopped
# and exits 0; with MARKS/fail.ID it exits 7; with MARKS/stubborn.ID it
# ignores SIGTERM and SIGINT until MARKS/release.ID. Every start after a
# restart exits 0 at once. Each start appends "ID GENERATION" to
# MARKS/starts.
cat >"$E2E_DIR/bin/signal_rank.sh" <<'RANK'
#!/bin/sh
m=$1
id=${RANK_ID:-${RANK:-main}}
generation=${TORCHELASTIC_RESTART_COUNT:-0}
echo "$id $generation" >>"$m/starts"
if [ "$generation" != 0 ]; then echo "rank $id done"; exit 0; fi
if [ -e "$m/stubborn.$id" ]; then
  trap '' TERM INT
  : >"$m/ready.$id"
  echo "rank $id ready, ignoring SIGTERM and SIGINT"
  while [ ! -e "$m/release.$id" ]; do sleep 0.02; done
  exit 0
fi
trap 'echo "$id" >>"$m/stopped"; echo "rank $id stopped by SIGTERM"; exit 0' TERM
: >"$m/ready.$id"
echo "rank $id ready"
while [ ! -e "$m/fail.$id" ]; do
  sleep 0.02 &
  wait $!
done
echo "rank $id failing with 7"
exit 7
RANK
chmod 0755 "$E2E_DIR/bin/signal_rank.sh"

# mpi: one key, trusted by every host (sshd starts; nothing logs in).
ssh-keygen -q -t ed25519 -N '' -C e2e -f "$E2E_DIR/key"
for i in 0 1; do
  install -m 0600 "$E2E_DIR/key" "$E2E_DIR/h$i/home/.ssh/id_ed25519"
  install -m 0644 "$E2E_DIR/key.pub" "$E2E_DIR/h$i/home/.ssh/authorized_keys"
done

signo_of() { kill -l "$1"; }
status_file() { echo "$E2E_DIR/h$1/status.json"; }

# The top-level "state" of host I's status file ("" when there is none).
state_of() {
  sed -n 's/^  "state": "\(.*\)",\{0,1\}$/\1/p' "$(status_file "$1")" 2>/dev/null || true
}
wait_state() { # I STATE SECONDS
  local deadline=$((SECONDS + $3))
  until [ "$(state_of "$1")" = "$2" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "host $1 not in $2 after $3 s (state '$(state_of "$1")')"
    sleep 0.01
  done
}

# Whether signal SIG (a name) is pending for process PID: trainit takes its
# signals through a signalfd, which dequeues them.
pending() {
  local bit=$((1 << ($(signo_of "$2") - 1))) key set
  while read -r key set; do
    case $key in SigPnd: | ShdPnd:) [ $((0x$set & bit)) -eq 0 ] || return 0 ;; esac
  done 2>/dev/null <"/proc/$1/status"
  return 1
}
# Sends SIG to host I's trainit and waits until trainit took it.
signal_host() {
  local pid deadline=$((SECONDS + 10))
  pid=$(trainit_pid "$1") || fail "host $1 has no trainit"
  kill -s "$2" "$pid"
  while pending "$pid" "$2"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "host $1's trainit never took SIG$2"
    sleep 0.005
  done
}

# Host I's status file at the end: JSON, state exit, exit_code CODE, every
# rank ended; its cause holds CAUSE ("-": null) and not LACKS (optional).
expect_status() {
  python3 - "$(status_file "$1")" "$2" "$3" "${4:-}" <<'PY' || fail "host $1's status file: see above"
import json, sys
path, code, cause, lacks = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
try:
    s = json.load(open(path))
except ValueError as e:
    sys.exit(f"{path} does not parse: {e}")
problems = []
if s["state"] != "exit":
    problems.append(f"state {s['state']}")
if s["exit_code"] != code:
    problems.append(f"exit_code {s['exit_code']}, expected {code}")
if cause == "-" and s["cause"] is not None:
    problems.append(f"cause {s['cause']!r}, expected none")
if cause != "-" and cause not in (s["cause"] or ""):
    problems.append(f"cause {s['cause']!r} lacks {cause!r}")
if lacks and lacks in (s["cause"] or ""):
    problems.append(f"cause {s['cause']!r} names {lacks!r}")
problems += [f"rank {r['name']} still {r['state']}" for r in s["ranks"] if r["state"] == "running" or r["exit_code"] is None]
if problems:
    sys.exit(f"{path}: " + "; ".join(problems) + "\n" + json.dumps(s, indent=2))
PY
}

# Host I's transition out of STATE was SIGTERM's, and SIGHUP moved nothing.
expect_left_by_sigterm() {
  grep -q "$2 -> stopping after .*: got SIGTERM" "$E2E_DIR/h$1/out" || fail "host $1 did not leave $2 on SIGTERM"
  ! grep -q -- "-> .*got SIGHUP" "$E2E_DIR/h$1/out" || fail "SIGHUP moved host $1's machine"
}

# Waits until rank ID took trainit's SIGTERM; fails after SECONDS.
wait_stopped() {
  local deadline=$((SECONDS + $2))
  until grep -qx "$1" "$marks/stopped" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "rank $1 never took trainit's SIGTERM"
    sleep 0.01
  done
}
# Waits until host I's output has TEXT; fails after SECONDS.
wait_output() {
  local deadline=$((SECONDS + $3))
  until grep -qF -- "$2" "$E2E_DIR/h$1/out"; do
    [ "$SECONDS" -lt "$deadline" ] || fail "host $1's output lacks '$2' after $3 s"
    sleep 0.01
  done
}

# Every rank in IDS took trainit's SIGTERM and ended itself.
expect_stopped() {
  local id
  for id in "$@"; do
    grep -qx "$id" "$marks/stopped" 2>/dev/null || fail "rank $id did not take trainit's SIGTERM"
  done
}

# No temporary file of an atomic write is left, every log ends with a whole
# line, and nothing runs in any host.
expect_clean() {
  local f left
  left=$(find "$E2E_DIR"/h[01] -name '*.tmp-*' 2>/dev/null | head -1)
  [ -z "$left" ] || fail "left half-written: $left"
  while IFS= read -r f; do
    [ "$(tail -c 1 "$f" | od -An -c | tr -d ' ')" = '\n' ] || fail "$f ends mid-line"
  done < <(find "$E2E_DIR"/h[01]/ma/log -type f -size +0)
  expect_nothing_left
}

# Before each case: no host runs, nothing of the last case is left.
fresh_case() {
  CASE="$1 $2"
  e2e_log "case $CASE"
  rm -rf "$marks" "$E2E_DIR"/h[01]/{rc,out,status.json,ma/log} "$E2E_DIR/bin/ssh-keygen"
  mkdir -p "$marks" "$E2E_DIR"/h{0,1}/ma/log
}

# host_start for the cases: a status file, the host's mount path.
start() {
  local i=$1
  shift
  host_start "$i" MA_MOUNT_PATH="$E2E_DIR/h$i/ma" "$@"
}
ascend() { # I [VAR=value ...] -- TRAINIT_ARGS...
  local i=$1
  shift
  local -a env=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    env+=("$1")
    shift
  done
  shift
  start "$i" RANK_TABLE_FILE="$E2E_DIR/h$i/table" "${env[@]}" -- --status-file "$(status_file "$i")" "$@" \
    -- signal_rank.sh "$marks"
}
mpi() { # I [VAR=value ...] -- TRAINIT_ARGS...
  local i=$1
  shift
  local -a env=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    env+=("$1")
    shift
  done
  shift
  start "$i" "${env[@]}" -- --mode mpi --status-file "$(status_file "$i")" "$@" -- true
}

# A host held before any rank runs, signalled: SIGTERM/SIGINT stop it with
# 128+S naming the signal; SIGHUP leaves it where it is, and SIGTERM ends it.
expect_stop_before_ranks() { # I STATE SIG
  local i=$1 state=$2 sig=$3
  signal_host "$i" "$sig"
  if [ "$sig" = HUP ]; then
    sleep 0.05 # time for a wrong transition to show
    [ "$(state_of "$i")" = "$state" ] || fail "SIGHUP moved host $i out of $state ($(state_of "$i"))"
    signal_host "$i" TERM
    expect_exit "$i" 143 10
    expect_status "$i" 143 SIGTERM
    expect_left_by_sigterm "$i" "$state"
  else
    expect_exit "$i" $((128 + $(signo_of "$sig"))) 10
    expect_status "$i" $((128 + $(signo_of "$sig"))) "SIG$sig"
  fi
  [ ! -e "$marks/starts" ] || fail "a rank started: $(cat "$marks/starts")"
}

# --- the cases ------------------------------------------------------------------

ascend_resolve_peers() {
  fresh_case ascend/resolve_peers "$1"
  ascend 0 MA_TASK_NAME=nowhere -- --peer-timeout 600
  wait_state 0 resolve_peers 20
  expect_stop_before_ranks 0 resolve_peers "$1"
  expect_clean
}

ascend_host_barrier_host0() {
  fresh_case ascend/host_barrier/host-0 "$1"
  ascend 0 -- --barrier-timeout 600
  wait_state 0 host_barrier 20
  expect_stop_before_ranks 0 host_barrier "$1"
  expect_clean
}

ascend_host_barrier_host1() {
  fresh_case ascend/host_barrier/host-1 "$1"
  ascend 1 -- --barrier-timeout 600
  wait_state 1 host_barrier 20
  expect_stop_before_ranks 1 host_barrier "$1"
  expect_clean
}

# 2 hosts × 2 ranks running; host 0 signalled. SIGHUP goes on to host 0's
# ranks, which die of it: the job stops everywhere with 129.
ascend_running() {
  local sig=$1 code
  fresh_case ascend/running "$sig"
  ascend 0 -- --grace 60
  ascend 1 -- --grace 60
  for r in 0 1 2 3; do wait_file "$marks/ready.$r" 30; done
  wait_state 0 running 10
  signal_host 0 "$sig"
  code=$((128 + $(signo_of "$sig")))
  expect_exit 0 "$code" 10
  expect_exit 1 "$code" 10
  if [ "$sig" = HUP ]; then
    expect_status 0 129 "killed by SIGHUP"
    expect_status 1 129 "killed by SIGHUP"
  else
    expect_status 0 "$code" "SIG$sig"
    expect_status 1 "$code" "SIG$sig"
    expect_stopped 0 1 2 3
  fi
  expect_clean
}

# Host 1's rank 3 fails with 7: both hosts stop; host 0's rank 0 ignores
# SIGTERM and holds host 0 in stopping. The signal changes nothing there (the
# first cause's 7 stays; SIGHUP reaches rank 0, which dies of it).
ascend_stopping() {
  local sig=$1
  fresh_case ascend/stopping "$sig"
  : >"$marks/stubborn.0"
  ascend 0 -- --grace 60
  ascend 1 -- --grace 60
  for r in 0 1 2 3; do wait_file "$marks/ready.$r" 30; done
  : >"$marks/fail.3"
  expect_exit 1 7 10
  wait_state 0 stopping 10
  wait_stopped 1 10 # host 0's stop went out (rank 0 ignores it)
  signal_host 0 "$sig"
  if [ "$sig" != HUP ]; then
    sleep 0.05 # time for a wrong transition to show
    [ "$(state_of 0)" = stopping ] || fail "SIG$sig moved host 0 out of stopping ($(state_of 0))"
    : >"$marks/release.0"
  fi
  expect_exit 0 7 10
  expect_status 0 7 "exited with 7" "SIG$sig"
  expect_status 1 7 "exited with 7"
  expect_stopped 1 2
  expect_clean
}

# torchrun, 2 hosts × 2 ranks, --restart on-failure: rank 3 fails; every
# host stops to start generation 1, host 0's rank 0 ignoring SIGTERM. A stop
# ends the restarting (128+S everywhere, no generation 1); SIGHUP reaches
# rank 0, and generation 1 runs and ends well on both hosts.
torchrun_restarting() {
  local sig=$1 code
  fresh_case torchrun/restarting "$sig"
  : >"$marks/stubborn.0"
  for i in 0 1; do
    start "$i" -- --mode torchrun --restart on-failure --grace 60 --status-file "$(status_file "$i")" \
      -- signal_rank.sh "$marks"
  done
  for r in 0 1 2 3; do wait_file "$marks/ready.$r" 30; done
  : >"$marks/fail.3"
  wait_state 0 stopping 10
  wait_output 0 "restarting the job (restart 1)" 10
  wait_stopped 1 10 # host 0's stop went out (rank 0 ignores it)
  signal_host 0 "$sig"
  if [ "$sig" = HUP ]; then
    for i in 0 1; do
      expect_exit "$i" 0 20
      expect_status "$i" 0 -
    done
    for r in 0 1 2 3; do grep -qx "$r 1" "$marks/starts" || fail "rank $r did not start in generation 1"; done
  else
    : >"$marks/release.0"
    code=$((128 + $(signo_of "$sig")))
    for i in 0 1; do
      expect_exit "$i" "$code" 10
      expect_status "$i" "$code" "SIG$sig"
    done
    ! grep -q " 1$" "$marks/starts" || fail "generation 1 started after a stop: $(cat "$marks/starts")"
  fi
  expect_stopped 1 2
  expect_clean
}

# mpi host 0 held in start_sshd: ssh-keygen (found on PATH) never ends.
mpi_start_sshd() {
  fresh_case mpi/start_sshd "$1"
  printf '#!/bin/sh\n: >"%s/keygen"\nexec sleep 1000\n' "$marks" >"$E2E_DIR/bin/ssh-keygen"
  chmod 0755 "$E2E_DIR/bin/ssh-keygen"
  mpi 0 -- --peer-timeout 600
  wait_file "$marks/keygen" 20
  [ "$(state_of 0)" = start_sshd ] || fail "host 0 in $(state_of 0), not start_sshd"
  expect_stop_before_ranks 0 start_sshd "$1"
  expect_clean
}

# mpi host 0 with its sshd up: the peers' names never resolve.
mpi_resolve_peers() {
  fresh_case mpi/resolve_peers "$1"
  mpi 0 MA_TASK_NAME=nowhere -- --peer-timeout 600
  wait_state 0 resolve_peers 20
  expect_stop_before_ranks 0 resolve_peers "$1"
  expect_clean
}

# mpi host 0 with its sshd up: host 1 resolves, but no sshd answers there.
mpi_wait_peers() {
  fresh_case mpi/wait_peers "$1"
  mpi 0 -- --peer-timeout 600
  wait_state 0 wait_peers 20
  expect_stop_before_ranks 0 wait_peers "$1"
  expect_clean
}

# mpi host 0 at the barrier: host 1's sshd port answers (a bare listener),
# host 1 never checks in.
mpi_host_barrier() {
  fresh_case mpi/host_barrier "$1"
  ip netns exec "$(host_ns 1)" python3 -c '
import socket, time
s = socket.create_server(("0.0.0.0", 36666))
open("'"$marks"'/listening", "w").close()
while True:
    c, _ = s.accept()
    c.close()
' &
  local listener=$!
  wait_file "$marks/listening" 20
  mpi 0 -- --peer-timeout 600 --barrier-timeout 600
  wait_state 0 host_barrier 20
  expect_stop_before_ranks 0 host_barrier "$1"
  kill "$listener"
  wait "$listener" 2>/dev/null || true
  expect_clean
}

for sig in TERM INT HUP; do
  ascend_resolve_peers "$sig"
  ascend_host_barrier_host0 "$sig"
  ascend_host_barrier_host1 "$sig"
  ascend_running "$sig"
  ascend_stopping "$sig"
  torchrun_restarting "$sig"
  mpi_start_sshd "$sig"
  mpi_resolve_peers "$sig"
  mpi_wait_peers "$sig"
  mpi_host_barrier "$sig"
done
e2e_log PASS
