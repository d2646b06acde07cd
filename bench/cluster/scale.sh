#!/bin/bash
# trainit's multi-host job at scale: N simulated hosts, each a real trainit
# as PID 1 (its own PID, mount, UTS and network namespaces), one rank a host
# (--mode torchrun, MA_NUM_GPUS=1, a shell rank: scale_rank.sh). Root only.
#
#   bench/cluster/scale.sh [TRAINIT_BINARY] [N ...]      (default N: 16 64 256 1024)
#
# Environment: SCALE_STEADY (seconds of the steady window in which host 0's
# heartbeat work is measured, default 10), SCALE_PEER_LOSS (--peer-loss of
# the lost-host runs, default 2), SCALE_KEEP (a directory: each N's job run,
# logs and status files, is copied there, for a closer look).
#
# Every host runs with --coll-arena off: the arena's 32 MiB a host are each
# host's own memory on a real cluster, but 32 GiB for 1,024 hosts on this
# one machine.
#
# Per N, three jobs on one simulated cluster:
#   job  the rank on host N-1 exits 3 after the steady window: every host
#        stops and exits 3;
#   cut  host N-1's link is cut (its bridge port set down: packets vanish,
#        nothing closes): the others stop after --peer-loss;
#   kill host N-1's trainit is SIGKILLed and its namespace deleted (the
#        container vanished: its connection closes at once).
# Figures, from trainit's own clock wherever the harness would otherwise
# count its own polling or the kernel's teardown of a namespace:
#   start    the last trainit's start (its check-in less its resolve_peers
#            time, from its log) -> every host spawned its rank ("since" of
#            the status file each rank copies when it starts: trainit's
#            wall-clock stamp of its spawn);
#   barrier  the last host's check-in (its log: entering host_barrier) ->
#            every host spawned its rank;
#   fan-out  the failing rank's exit (its host's trainit entering stopping)
#            -> the last host entered stopping (log: "running -> stopping
#            after S s", from the spawn stamp);
#   e2e      the failing rank's exit -> the last trainit exited (the "since"
#            of state exit in each final status file);
#   cut/kill the bench cutting or killing host N-1 -> every other host
#            entered stopping. A host starved of CPU for --peer-loss while
#            1,024 start at once on a small machine is lost, rightly, before
#            the cut: such a run is made again with twice the peer loss (the
#            cell says which held; "-": none did);
#   host 0   VmHWM at the end of the steady window; CPU seconds of the whole
#            job (/proc/PID/schedstat, read until it exits); in the steady
#            window, where only heartbeats flow: its CPU share and the bytes
#            on its eth0 (frames with their TCP/IP headers, and the ACKs).
#
# Each host's mount namespace (its copy of the machine's mounts) is pinned
# once every rank of a run started, and torn down only after the run's last
# host exited: a real host pays that teardown on its own CPUs once its
# trainit is gone, where 1,024 of them at once on this machine took four
# tenths of its CPU from the hosts still stopping (perf).
#
# Likewise the harness: once every rank of a run started, each host's
# launcher (its `unshare`, which wakes only to reap its trainit and exit)
# runs at nice 19, and the bench's own shell too while it waits for the
# hosts to exit. Their work, a tenth and a twelfth of the machine's CPU
# during a stop of 1,024 hosts (perf), is a container runtime's on the host's
# own CPUs, or an orchestrator's elsewhere; at nice 0 it ran ahead of hosts
# still to take their stop. trainit and its ranks keep the nice they started
# with (0): a launcher's nice changes after it forked the host.
#
# The network: hosts 10.213.96.10 + i in 10.213.96.0/20 (a private test
# subnet that exists only inside the bench's namespaces), on Linux bridges of
# at most 512 ports each (a bridge takes 1,023 at most), living in a
# namespace of their own and joined by veth pairs to the first: a star, no
# loop, so no spanning tree is needed and a frame crosses at most two
# bridges. (macvlan needs a parent device in one namespace with every host's
# device in another: a bridge is closer to what e2e uses.) Two kernel limits
# are the whole machine's, not a namespace's, and too small for 1,024 hosts
# on one machine: the neighbour table (gc_thresh3, 1,024 entries: host 0
# alone needs N-1) and the per-CPU backlog of received frames
# (netdev_max_backlog, 1,000: one ARP broadcast flooded to N ports queues N
# frames). The bench raises them while it runs and puts them back on exit.
# Its bridges call no iptables hooks (bridge-nf-call-*, set in its own
# bridge namespace), as a switch between hosts would not.
#
# Everything it makes is its own and removed by an EXIT trap, interrupted or
# not: namespaces scale$$-*, /etc/netns/scale$$-*, the processes in them, a
# temporary directory under /var/tmp and the tmpfs on it (with the pinned
# mount namespaces under it), the sysctls it raised. Every wait has a deadline.
set -euo pipefail
[ "$(id -u)" = 0 ] || {
  echo "scale.sh: root only (network namespaces)" >&2
  exit 1
}
here=$(cd "$(dirname "$0")" && pwd)
TRAINIT_BIN=${1:-$here/../../build/release/init/trainit}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(16 64 256 1024)
steady=${SCALE_STEADY:-10}
peer_loss=${SCALE_PEER_LOSS:-2}
max_hosts_per_bridge=512

ID="scale$$"
VJ=ma-job-scale
TASK=worker
DIR=$(mktemp -d /var/tmp/trainit-scale.XXXXXX)
NETNS_DIR_WAS_THERE=$([ -d /etc/netns ] && echo 1 || echo 0)
declare -A saved_sysctl=()
declare -a launcher=() # host i's `unshare` (the parent of its trainit)
hosts=0
host0_pid= # the job's host 0, known before its stop

log() { printf '[scale %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
now() { date +%s.%N; }

host_ns() { echo "$ID-h$1"; }
host_ip() {
  local n=$(($1 + 10))
  echo "10.213.$((96 + n / 256)).$((n % 256))"
}
peer_name() { echo "$VJ-$TASK-$1.$VJ"; }

# host i's trainit (PID 1 of its PID namespace): the child of its launcher.
trainit_pid() {
  local u=${launcher[$1]:-}
  [ -n "$u" ] && awk '{print $1}' "/proc/$u/task/$u/children" 2>/dev/null
}

kill_hosts() {
  local i pid
  for i in "${!launcher[@]}"; do
    pid=$(trainit_pid "$i" || true)
    # PID 1 of a PID namespace: its death SIGKILLs everything in it.
    [ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true
    kill -KILL "${launcher[$i]}" 2>/dev/null || true
  done
  launcher=()
  { wait; } 2>/dev/null || true
}

cleanup() {
  local rc=$? ns pids name
  trap - EXIT INT TERM
  kill_hosts
  # Whatever is left in a namespace of ours (a launcher that died before
  # its trainit), then the namespaces, in one batch.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$ID-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    echo "netns del $ns"
  done | ip -force -batch - 2>/dev/null || true
  rm -rf /etc/netns/"$ID"-*
  [ "$NETNS_DIR_WAS_THERE" = 1 ] || rmdir /etc/netns 2>/dev/null || true
  for name in "${!saved_sysctl[@]}"; do
    sysctl -qw "$name=${saved_sysctl[$name]}" || true
  done
  ! mountpoint -q "$DIR" || umount -l "$DIR"
  rm -rf "$DIR"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# The hosts' status files, logs and marks on a tmpfs of the bench's own: on
# one ext4 directory, 1,024 hosts creating and renaming their status files
# at once serialise on its lock and its inode allocator (a seventh of
# trainit's CPU while they start, by perf), which a host writing to its own
# disk never meets.
mount -t tmpfs -o mode=0755,size=2g tmpfs "$DIR"
# Each host's mount namespace is pinned to a file under $DIR/ns (a bind
# mount, so $DIR must not propagate) until the run's last host has exited.
mount --make-private "$DIR"
mkdir -p "$DIR/bin" "$DIR/ns"
install -m 0755 "$TRAINIT_BIN" "$DIR/bin/trainit"
install -m 0755 "$here/scale_rank.sh" "$DIR/bin/scale_rank.sh"

raise_sysctl() { # NAME VALUE: at least VALUE while the bench runs
  local current
  current=$(sysctl -n "$1")
  if [ "$current" -lt "$2" ]; then
    [ -n "${saved_sysctl[$1]:-}" ] || saved_sysctl[$1]=$current
    sysctl -qw "$1=$2"
  fi
}

# N hosts on ceil(N / 512) bridges in namespace $ID-br.
cluster_up() {
  hosts=$1
  local i b bridges=$(((hosts + max_hosts_per_bridge - 1) / max_hosts_per_bridge))
  raise_sysctl net.ipv4.neigh.default.gc_thresh1 $((hosts * 2))
  raise_sysctl net.ipv4.neigh.default.gc_thresh2 $((hosts * 4))
  raise_sysctl net.ipv4.neigh.default.gc_thresh3 $((hosts * 8))
  # A broadcast (an ARP request) flooded to N ports queues N frames at once
  # on one CPU's backlog (1,000 by default, for the whole machine): past it
  # the kernel drops them, and a host waits out ARP and SYN retransmissions
  # (1 s, 3 s). So does host 0's burst of N heartbeats.
  raise_sysctl net.core.netdev_max_backlog $((hosts * 8))
  {
    echo "netns add $ID-br"
    for ((i = 0; i < hosts; i++)); do echo "netns add $(host_ns "$i")"; done
  } | ip -batch -
  # The bridges forward frames as a switch does, without iptables: where
  # br_netfilter is loaded (Docker loads it) every frame would otherwise
  # cross the bridge hooks, in the sender's CPU time (about a third of host
  # 0's steady-state heartbeat cost at 1,024 hosts, by perf). The setting is
  # per namespace: the bench's own alone.
  ip netns exec "$ID-br" sh -c 'for f in /proc/sys/net/bridge/bridge-nf-call-*; do
    [ ! -e "$f" ] || echo 0 >"$f"; done'
  {
    # No IPv6 anywhere (addrgenmode none: no link-local address, hence no
    # duplicate address detection, router solicitation or MLD): each of
    # those multicasts is flooded to every port, N x N frames at start-up.
    for ((b = 0; b < bridges; b++)); do
      echo "link add br$b type bridge"
      echo "link set br$b addrgenmode none"
      echo "link set br$b up"
    done
    for ((b = 1; b < bridges; b++)); do # each bridge joined to the first
      echo "link add up$b type veth peer name dn$b"
      echo "link set up$b addrgenmode none"
      echo "link set dn$b addrgenmode none"
      echo "link set up$b master br0 up"
      echo "link set dn$b master br$b up"
    done
    for ((i = 0; i < hosts; i++)); do
      echo "link add h$i type veth peer name eth0 netns $(host_ns "$i")"
      echo "link set h$i addrgenmode none"
      echo "link set h$i master br$((i / max_hosts_per_bridge)) up"
    done
  } | ip -n "$ID-br" -batch -
  # Beside the namespaces' own /etc/netns directories: hard links, one file.
  local files="/etc/netns/$ID-files" hosts_file="/etc/netns/$ID-files/hosts"
  mkdir -p "$files"
  {
    echo "127.0.0.1 localhost"
    for ((i = 0; i < hosts; i++)); do echo "$(host_ip "$i") $(peer_name "$i") $VJ-$TASK-$i"; done
  } >"$hosts_file"
  printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"$files/resolv.conf"
  for ((i = 0; i < hosts; i++)); do
    printf 'link set lo up\nlink set eth0 addrgenmode none\naddr add %s/20 dev eth0\nlink set eth0 up\n' "$(host_ip "$i")" |
      ip -n "$(host_ns "$i")" -batch -
    mkdir -p "/etc/netns/$(host_ns "$i")"
    ln "$hosts_file" "/etc/netns/$(host_ns "$i")/hosts"
    ln "$files/resolv.conf" "/etc/netns/$(host_ns "$i")/resolv.conf"
  done
}

cluster_down() {
  kill_hosts
  local i
  {
    echo "netns del $ID-br"
    for ((i = 0; i < hosts; i++)); do echo "netns del $(host_ns "$i")"; done
  } | ip -force -batch - 2>/dev/null || true
  rm -rf /etc/netns/"$ID"-*
  hosts=0
}

# host_start I RUN ARGS...: trainit ARGS as PID 1 of host I; its output in
# $DIR/RUN/hI/out.
host_start() {
  local i=$1 run=$2
  shift 2
  # shellcheck disable=SC2016 # $1, $2 are sh -c's own
  ip netns exec "$(host_ns "$i")" unshare --pid --fork --mount-proc --uts --propagation private \
    sh -c 'hostname "$1" && mount -n -t tmpfs -o mode=1777 tmpfs /tmp && mount -n -t tmpfs -o mode=0755 tmpfs /run &&
           shift && exec "$@"' sh "$VJ-$TASK-$i" \
    env -i "PATH=$DIR/bin:/usr/local/bin:/usr/bin:/bin" "MA_NUM_HOSTS=$hosts" "MA_TASK_INDEX=$i" \
    "VC_TASK_INDEX=$i" "MA_VJ_NAME=$VJ" "MA_TASK_NAME=$TASK" MA_NUM_GPUS=1 \
    "MA_CURRENT_INSTANCE_NAME=$VJ-$TASK-$i" "MA_CURRENT_HOST_IP=$(host_ip "$i")" HOME=/root \
    "$DIR/bin/trainit" "$@" >"$DIR/$run/h$i/out" 2>&1 </dev/null &
  launcher[i]=$!
}

# Starts every host of run RUN with trainit's extra ARGS. Each host has a
# directory of its own, $DIR/RUN/hI: its output (out), its status file
# (status.json), its rank's start mark (started) and the FIFO its rank
# waits on (hold). Not one directory for all: each status file is rewritten
# through a temporary file and a rename, and both take the directory's lock,
# so 1,024 hosts writing theirs into one directory wait on each other, on a
# lock whose holder the scheduler may preempt (one host took its stop 590 ms
# late asleep on it, by ftrace), where a real host writes to its own /tmp.
job_start() {
  local run=$1 i
  local -a dirs=() holds=()
  shift
  for ((i = 0; i < hosts; i++)); do
    dirs+=("$DIR/$run/h$i")
    holds+=("$DIR/$run/h$i/hold")
  done
  mkdir -p "$DIR/$run" "${dirs[@]}"
  mkfifo "$DIR/$run/fail" "${holds[@]}"
  for ((i = 0; i < hosts; i++)); do
    host_start "$i" "$run" -v --mode torchrun --coll-arena off --status-file "$DIR/$run/h$i/status.json" "$@" -- \
      sh "$DIR/bin/scale_rank.sh" "$DIR/$run/h$i" "$DIR/$run/fail" $((hosts - 1))
  done
}

# Waits until every rank of run RUN started; fails after SECONDS. Returns 1
# when a host's trainit exited first (the job stopped before it was whole).
wait_started() {
  local run=$1 deadline=$((SECONDS + $2)) n i tick
  for ((tick = 0; ; tick++)); do
    n=$({ compgen -G "$DIR/$run/h*/started" || true; } | wc -l)
    [ "$n" -lt "$hosts" ] || return 0
    # The launchers twice a second: N kill(2)s are CPU the hosts want.
    if [ $((tick % 5)) = 0 ]; then
      for i in "${!launcher[@]}"; do
        kill -0 "${launcher[$i]}" 2>/dev/null || {
          log "host $i exited with $n of $hosts ranks started"
          return 1
        }
      done
    fi
    [ $SECONDS -lt $deadline ] || fail "$n of $hosts ranks started after $2 s"
    sleep 0.1
  done
}

# Waits until every launcher but those in SKIP exited; fails after SECONDS.
# Meanwhile keeps host 0's last CPU reading (ns) in $DIR/RUN/cpu0.
wait_all_exited() {
  local run=$1 seconds=$2 skip=${3:-} deadline=$((SECONDS + $2)) i p0 cpu tick=0
  local -a alive=()
  for i in "${!launcher[@]}"; do [ "$i" = "$skip" ] || alive+=("$i"); done
  renice -n 19 -p $$ >/dev/null  # back to 0 below, before the next run's hosts start
  # Host 0 may be gone already (a small job stops in milliseconds): its pid
  # from before the stop, then.
  p0=${host0_pid:-$(trainit_pid 0 || true)}
  host0_pid=
  # Host 0's CPU every 20 ms (its last reading before it exits is the job's
  # whole); the launchers every 100 ms, only those still alive: 1,024
  # kill(2)s every 20 ms took the harness to 29 % of the machine's CPU while
  # the hosts stopped (perf).
  for (( ; ; tick++)); do
    if [ -n "$p0" ] && read -r cpu _ 2>/dev/null <"/proc/$p0/schedstat"; then
      echo "$cpu" >"$DIR/$run/cpu0"
    fi
    if [ $((tick % 5)) = 0 ]; then
      local -a still=()
      for i in "${alive[@]}"; do
        ! kill -0 "${launcher[$i]}" 2>/dev/null || still+=("$i")
      done
      alive=("${still[@]}")
      [ ${#alive[@]} -gt 0 ] || break
      [ $SECONDS -lt $deadline ] || fail "${#alive[@]} hosts still running $seconds s after the stop"
    fi
    sleep 0.02
  done
  renice -n 0 -p $$ >/dev/null
  kill_hosts
  release_mount_namespaces "$run"
}

# Pins the mount namespace of each of run RUN's hosts (its launcher's) to a
# file under $DIR/ns, a bind mount, until release_mount_namespaces: one
# process for all (unshare --mount=FILE races with itself under load).
pin_mount_namespaces() {
  local run=$1 i
  for i in "${!launcher[@]}"; do echo "${launcher[$i]} $DIR/ns/$run-$i"; done |
    python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
MS_BIND = 4096
for line in sys.stdin:
    pid, path = line.split()
    open(path, "w").close()
    if libc.mount(f"/proc/{pid}/ns/mnt".encode(), path.encode(), None, MS_BIND, None) != 0:
        print(f"scale.sh: cannot pin {pid}'"'"'s mount namespace: errno {ctypes.get_errno()}", file=sys.stderr)
'
}

# The launchers to nice 19, every host of the run started (see the top).
quiet_launchers() {
  renice -n 19 -p "${launcher[@]}" >/dev/null 2>&1 || true
}

# The mount namespaces of run RUN's hosts, pinned once they all ran: each
# host's copy of the machine's mounts (two dozen here) is torn down now, in
# one batch, rather than by each host's exit while the others still stop
# (namespace teardown was four tenths of the machine's CPU while 1,024 hosts
# stopped, and every path lookup waited on the mount lock it holds: a cost
# a real host pays on its own CPUs, after its trainit is gone).
release_mount_namespaces() {
  local pinned=("$DIR/ns/$1"-*)
  [ -e "${pinned[0]}" ] || return 0
  umount "${pinned[@]}" 2>/dev/null || true
  rm -f "${pinned[@]}"
}

# Host 0's counters now: "cpu_ns eth0_rx_bytes eth0_tx_bytes vmhwm_kb
# listen_drops" (connections its kernel dropped for want of room in the
# accept queue: each costs a host a SYN retransmission, 1 s and more).
host0_sample() {
  local p0
  p0=$(trainit_pid 0)
  echo "$(awk '{print $1}' "/proc/$p0/schedstat")" \
    "$(awk '$1 == "eth0:" {print $2, $10}' "/proc/$p0/net/dev")" \
    "$(awk '/^VmHWM/ {print $2}' "/proc/$p0/status")" \
    "$(awk '$1 == "TcpExt:" && !names {for (i = 2; i <= NF; i++) col[$i] = i; names = 1; next}
            $1 == "TcpExt:" {print $col["ListenDrops"]}' "/proc/$p0/net/netstat")"
}

# The run RUN (cut or kill) of the current N: host N-1 cut off or killed
# once every rank runs. A job that stops before that (a host starved of CPU
# for --peer-loss while N hosts start on a small machine is lost, rightly) is
# run again with twice the peer loss, twice at most; the report gives the
# peer loss that held.
lost_run() {
  local run=$1 loss=$peer_loss victim trigger=0
  local last=$((hosts - 1)) start_deadline=$((60 + hosts / 4))
  for _ in 1 2 3; do
    rm -rf "${DIR:?}/$run"
    log "N=$hosts: $run, --peer-loss $loss (host $last: $([ "$run" = cut ] && echo "its link cut" ||
      echo "its trainit SIGKILLed, its namespace deleted"))"
    job_start "$run" --peer-loss "$loss"
    if wait_started "$run" "$start_deadline"; then
      pin_mount_namespaces "$run"
      quiet_launchers
      sleep 1
      if [ "$run" = cut ]; then
        trigger=$(now)
        ip -n "$ID-br" link set "h$last" down
      else
        victim=$(trainit_pid "$last")
        trigger=$(now)
        kill -KILL "$victim"
        ip netns del "$(host_ns "$last")"
      fi
    fi
    wait_all_exited "$run" $((30 + loss)) "$([ "$run" = kill ] && [ "$trigger" != 0 ] && echo "$last")"
    [ "$run" != cut ] || ip -n "$ID-br" link set "h$last" up
    [ "$trigger" = 0 ] || break
    loss=$((loss * 2))
  done
  echo "$trigger" >"$DIR/$run/trigger"
  echo "$loss" >"$DIR/$run/peer_loss"
}

# One N: the three runs, then a row of figures from scale_report.py in
# $DIR/rows.
measure() {
  local n=$1 trigger before after
  log "N=$n: bringing up the cluster"
  cluster_up "$n"
  local start_deadline=$((60 + n / 4))

  log "N=$n: job (the rank on host $((n - 1)) exits 3)"
  job_start job
  wait_started job "$start_deadline" || fail "the job stopped before every rank started"
  pin_mount_namespaces job
  quiet_launchers
  before=$(host0_sample)
  sleep "$steady"
  after=$(host0_sample)
  host0_pid=$(trainit_pid 0)
  echo "${after%% *}" >"$DIR/job/cpu0"  # until wait_all_exited reads later ones
  trigger=$(now)
  timeout 10 sh -c "echo x >'$DIR/job/fail'" || fail "the failing rank did not take its cue"
  wait_all_exited job 60
  echo "$trigger" >"$DIR/job/trigger"
  echo "$before" >"$DIR/job/host0_before"
  echo "$after" >"$DIR/job/host0_after"

  lost_run cut
  lost_run kill

  python3 "$here/scale_report.py" row "$DIR" "$n" "$steady" "$peer_loss" >>"$DIR/rows"
  cluster_down
  if [ -n "${SCALE_KEEP:-}" ]; then cp -r "$DIR/job" "$SCALE_KEEP/job-$n"; fi
  rm -rf "$DIR/job" "$DIR/cut" "$DIR/kill"
}

load=$(cut -d' ' -f1-3 /proc/loadavg)
for n in "${sizes[@]}"; do
  [ "$n" -ge 2 ] || fail "N must be 2 or more"
  measure "$n"
done
echo "command: bench/cluster/scale.sh $TRAINIT_BIN ${sizes[*]} (SCALE_STEADY=$steady SCALE_PEER_LOSS=$peer_loss)"
echo "host: $(uname -sr), $(nproc) CPUs; load average before: $load, after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/scale_report.py" header
cat "$DIR/rows"
