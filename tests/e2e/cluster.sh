# A simulated cluster for the e2e tests, sourced by each scenario (bash).
#
#   cluster_up H             H hosts h0..h(H-1), each a network namespace with
#                            eth0 on one bridge; the bridge lives in a
#                            namespace of its own
#   host_start I [VAR=value ...] -- TRAINIT_ARGS...
#                            trainit as PID 1 of host I (its own PID, mount
#                            and UTS namespaces), with host I's platform
#                            environment plus VAR=value; its output goes to
#                            $E2E_DIR/hI/out, its exit code to .../rc
#   host_wait I SECONDS      waits for host I's trainit to exit; prints its
#                            code, or fails when SECONDS pass first
#   host_kill_namespace I    SIGKILLs everything in host I and deletes its
#                            namespace (the container vanished)
#   cluster_user NAME        a non-root user NAME that exists only inside the
#                            hosts (a private /etc/passwd and /etc/group bind-
#                            mounted in each host's mount namespace, a uid the
#                            machine does not use); host_start then runs as it
#
# Everything it makes is its own: namespaces named $E2E_ID-*, one private
# test subnet ($E2E_SUBNET.0/24) that exists only inside them, files under
# $E2E_DIR and /etc/netns/$E2E_ID-* (what `ip netns exec` bind-mounts over
# /etc/hosts and /etc/resolv.conf), and what each host has as a container
# would: its own /tmp and /run (empty tmpfs) and a private home: the user's
# home directory ($HOME/.ssh included) is a bind mount of $E2E_DIR/hI/home, so
# the machine's own is never read or written. The
# binaries a host runs are copied into $E2E_DIR/bin (0755), reachable from
# any uid whatever the checkout's permissions. An EXIT trap removes it all,
# whether the scenario passed, failed or was interrupted.
#
# Platform names: host I is $E2E_VJ-$E2E_TASK-I.$E2E_VJ (docs/contract.md
# §1), in every host's /etc/hosts unless cluster_up was told to leave it out
# (E2E_UNLISTED="I ...").
set -euo pipefail

: "${TRAINIT_BIN:?TRAINIT_BIN must name the trainit binary}"
# TRAINIT_E2E_EMULATOR (the aarch64 preset: qemu-aarch64-static) runs each
# host's trainit through the emulator; unset, trainit runs as it is.
E2E_ID="te$$"
E2E_SUBNET=10.213.77
E2E_VJ=ma-job-e2e
E2E_TASK=worker
E2E_HOSTS=0
E2E_UNLISTED="${E2E_UNLISTED:-}"
E2E_NETNS_DIR_WAS_THERE=$([ -d /etc/netns ] && echo 1 || echo 0)
# `ip netns add` makes /run/netns (the names of the namespaces) a mount of
# its own: made here, it is unmade when the cluster goes, once no namespace
# of anyone's is named in it.
E2E_NETNS_RUN_WAS_THERE=$([ -d /run/netns ] && echo 1 || echo 0)
E2E_NETNS_RUN_WAS_MOUNTED=$(mountpoint -q /run/netns 2>/dev/null && echo 1 || echo 0)
E2E_DIR=$(mktemp -d /var/tmp/trainit-e2e.XXXXXX)
chmod 0755 "$E2E_DIR"
mkdir -p "$E2E_DIR/bin"
install -m 0755 "$TRAINIT_BIN" "$E2E_DIR/bin/trainit"
for e2e_program in rank.py ddp_train.py pytorch_init_method.py ms_stand_in.py record_argv.py; do
  install -m 0755 "$(dirname "${BASH_SOURCE[0]}")/$e2e_program" "$E2E_DIR/bin/$e2e_program"
done

e2e_log() { printf '[e2e %s] %s\n' "$(date +%T.%3N)" "$*" >&2; }
fail() {
  e2e_log "FAIL: $*"
  exit 1
}

cluster_down() {
  local rc=$?
  local ns pids
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$E2E_ID-" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  # Every host's /etc/netns directory, also of a namespace a test deleted
  # itself (a host whose container vanished).
  rm -rf /etc/netns/"$E2E_ID"-*
  if [ "$rc" -ne 0 ] && [ -d "$E2E_DIR" ]; then
    local f
    for f in "$E2E_DIR"/h*/out; do
      [ -f "$f" ] && { echo "----- ${f#"$E2E_DIR"/}"; tail -n 60 "$f"; } >&2
    done
  fi
  rm -rf "$E2E_DIR"
  [ "$E2E_NETNS_DIR_WAS_THERE" = 1 ] || rmdir /etc/netns 2>/dev/null || true
  if [ "$E2E_NETNS_RUN_WAS_MOUNTED" = 0 ] && mountpoint -q /run/netns 2>/dev/null &&
    [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
    umount -n /run/netns 2>/dev/null || true
  fi
  [ "$E2E_NETNS_RUN_WAS_THERE" = 1 ] || rmdir /run/netns 2>/dev/null || true
  exit "$rc"
}
trap cluster_down EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

peer_name() { echo "$E2E_VJ-$E2E_TASK-$1.$E2E_VJ"; }
host_ip() { echo "$E2E_SUBNET.$((10 + $1))"; }
host_ns() { echo "$E2E_ID-h$1"; }

cluster_up() {
  E2E_HOSTS=$1
  local br="$E2E_ID-br" i ns
  ip netns add "$br"
  ip -n "$br" link add br0 type bridge
  ip -n "$br" link set br0 up
  for ((i = 0; i < E2E_HOSTS; i++)); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    ip -n "$br" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$br" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$(host_ip "$i")/24" dev eth0
    ip -n "$ns" link set eth0 up
    mkdir -p "/etc/netns/$ns" "$E2E_DIR/h$i/home/.ssh"
    chmod 0700 "$E2E_DIR/h$i/home/.ssh"
    printf 'nameserver 127.0.0.1\noptions timeout:1 attempts:1\n' >"/etc/netns/$ns/resolv.conf"
  done
  local hosts="127.0.0.1 localhost"$'\n'
  for ((i = 0; i < E2E_HOSTS; i++)); do
    case " $E2E_UNLISTED " in *" $i "*) continue ;; esac
    hosts+="$(host_ip "$i") $(peer_name "$i") $E2E_VJ-$E2E_TASK-$i"$'\n'
  done
  for ((i = 0; i < E2E_HOSTS; i++)); do
    printf '%s' "$hosts" >"/etc/netns/$(host_ns "$i")/hosts"
  done
}

# The environment the platform gives host I (docs/contract.md §1).
host_env() {
  local i=$1
  echo "PATH=$E2E_DIR/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
  echo "MA_NUM_HOSTS=$E2E_HOSTS"
  echo "MA_TASK_INDEX=$i"
  echo "VC_TASK_INDEX=$i"
  echo "MA_VJ_NAME=$E2E_VJ"
  echo "MA_TASK_NAME=$E2E_TASK"
  echo "MA_NUM_GPUS=${E2E_GPUS:-2}"
  echo "MA_CURRENT_INSTANCE_NAME=$E2E_VJ-$E2E_TASK-$i"
  echo "MA_CURRENT_HOST_IP=$(host_ip "$i")"
}

# cluster_user NAME: a user of the hosts only, as a container image would
# have one. The machine's own /etc/passwd and /etc/group are read, never
# written: each host sees a copy of them with NAME added, so the test needs no
# user of the machine and leaves none behind.
cluster_user() {
  local name=$1 uid=2000
  while getent passwd "$uid" >/dev/null || getent group "$uid" >/dev/null; do uid=$((uid + 1)); done
  mkdir -p "$E2E_DIR/etc"
  { cat /etc/passwd && echo "$name:x:$uid:$uid::/home/$name:/bin/sh"; } >"$E2E_DIR/etc/passwd"
  { cat /etc/group && echo "$name:x:$uid:"; } >"$E2E_DIR/etc/group"
  chmod 0644 "$E2E_DIR/etc/passwd" "$E2E_DIR/etc/group"
  E2E_USER=$name E2E_UID=$uid E2E_USER_HOME=/home/$name
}

# host_start I [VAR=value ...] -- ARGS...: runs `trainit ARGS...` as PID 1 of
# host I, as the cluster_user when one was made (else root), in the background.
host_start() {
  local i=$1
  shift
  local -a env
  mapfile -t env < <(host_env "$i")
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    env+=("$1")
    shift
  done
  [ "${1:-}" = "--" ] && shift
  local dir="$E2E_DIR/h$i" home=/root uid=0 gid=0 user=root
  if [ -n "${E2E_USER:-}" ]; then
    user=$E2E_USER home=$E2E_USER_HOME uid=$E2E_UID gid=$E2E_UID
    chown -R "$uid:$gid" "$dir/home"
  fi
  env+=("HOME=$home" "USER=$user")
  rm -f "$dir/rc"
  (
    set +e
    # shellcheck disable=SC2016
    ip netns exec "$(host_ns "$i")" unshare --pid --fork --mount-proc --uts --propagation private \
      sh -c 'hostname "$1" && mount -n -t tmpfs -o mode=1777 tmpfs /tmp && mount -n -t tmpfs -o mode=0755 tmpfs /run &&
             { [ ! -f "$4/passwd" ] || { mount -n --bind "$4/passwd" /etc/passwd && mount -n --bind "$4/group" /etc/group; }; } &&
             { [ -d "$3" ] || mount -n -t tmpfs -o mode=0755 tmpfs "${3%/*}/"; } && mkdir -p "$3" &&
             mount -n --bind "$2" "$3" && shift 4 && exec "$@"' \
      sh "$E2E_VJ-$E2E_TASK-$i" "$dir/home" "$home" "$E2E_DIR/etc" \
      setpriv --reuid="$uid" --regid="$gid" --clear-groups \
      env -i "${env[@]}" ${TRAINIT_E2E_EMULATOR:+"$TRAINIT_E2E_EMULATOR"} "$E2E_DIR/bin/trainit" "$@" >"$dir/out" 2>&1 </dev/null
    echo $? >"$dir/rc.tmp" && mv "$dir/rc.tmp" "$dir/rc"
  ) 2>>"$dir/harness.err" &
}

# Prints host I's exit code once it exited; fails after SECONDS.
host_wait() {
  local i=$1 deadline=$((SECONDS + $2))
  while [ ! -f "$E2E_DIR/h$i/rc" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "host $i still running after $2 s"
    sleep 0.05
  done
  cat "$E2E_DIR/h$i/rc"
}

# Asserts host I exited with CODE within SECONDS.
expect_exit() {
  local i=$1 code=$2 rc
  rc=$(host_wait "$i" "$3")
  [ "$rc" = "$code" ] || fail "host $i exited $rc, expected $code"
  e2e_log "host $i exited $rc"
}

host_kill_namespace() {
  local ns pids
  ns=$(host_ns "$1")
  pids=$(ip netns pids "$ns" || true)
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids
  ip netns del "$ns"
}

# Fails when anything still runs in a host's network namespace.
expect_nothing_left() {
  local i pids
  for ((i = 0; i < E2E_HOSTS; i++)); do
    ip netns list | awk '{print $1}' | grep -qx "$(host_ns "$i")" || continue
    pids=$(ip netns pids "$(host_ns "$i")" || true)
    # shellcheck disable=SC2086
    [ -z "$pids" ] || fail "host $i: still running: $(ps -o pid=,comm= -p $pids | tr '\n' ' ')"
  done
}

# Fails unless host I's output has TEXT (a fixed string).
expect_output() {
  grep -qF -- "$2" "$E2E_DIR/h$1/out" || fail "host $1's output lacks '$2'"
}

# --- the multi-host Ascend job ---------------------------------------------

# Writes a complete template-1 rank table of every host (E2E_GPUS devices
# each, ranks numbered host by host) where host I's trainit looks for it, and
# prints nothing. host_ascend_env I prints the variables that point host I at
# it, its logs and its status file.
ascend_tables() {
  local i d rank=0 servers=""
  for ((i = 0; i < E2E_HOSTS; i++)); do
    local devices=""
    for ((d = 0; d < ${E2E_GPUS:-2}; d++)); do
      devices+="${devices:+,}{\"device_id\":\"$d\",\"device_ip\":\"192.168.$i.$((d + 1))\",\"rank_id\":\"$rank\"}"
      rank=$((rank + 1))
    done
    servers+="${servers:+,}{\"server_id\":\"$(host_ip "$i")\",\"device\":[$devices]}"
  done
  for ((i = 0; i < E2E_HOSTS; i++)); do
    mkdir -p "$E2E_DIR/h$i/table" "$E2E_DIR/h$i/ma/log"
    printf '{"status":"completed","version":"1.0","server_count":"%d","server_list":[%s]}\n' \
      "$E2E_HOSTS" "$servers" >"$E2E_DIR/h$i/table/jobstart_hccl.json"
  done
}
host_ascend_env() {
  echo "RANK_TABLE_FILE=$E2E_DIR/h$1/table"
  echo "MA_MOUNT_PATH=$E2E_DIR/h$1/ma"
}
# host_start_ascend I [VAR=value ...] -- TRAINIT_ARGS... -- COMMAND...
host_start_ascend() {
  local i=$1
  shift
  local -a env
  mapfile -t env < <(host_ascend_env "$i")
  host_start "$i" "${env[@]}" "$@"
}
status_of() { cat "$E2E_DIR/h$1/status.json"; }

# The host pid of host I's trainit (PID 1 of its PID namespace).
trainit_pid() {
  local pid
  for pid in $(ip netns pids "$(host_ns "$1")"); do
    if grep -q '^NSpid:.*[[:space:]]1$' "/proc/$pid/status" 2>/dev/null; then
      echo "$pid"
      return 0
    fi
  done
  return 1
}

# Waits until FILE exists (a rank's mark); fails after SECONDS.
wait_file() {
  local deadline=$((SECONDS + $2))
  while [ ! -e "$1" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "no $1 after $2 s"
    sleep 0.05
  done
}

now_ms() { date +%s%3N; }
