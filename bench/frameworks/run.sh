#!/bin/bash
# torchrun's job, natively, against Debian's torchrun (PyTorch 1.13, patched
# in memory as bench/job does: Std.from_str is broken on Python 3.11), side
# by side in one run: 2 hosts × 2 gloo ranks on the simulated cluster of
# tests/e2e (a network namespace and PID namespace per host). Root only.
#
#   bench/frameworks/run.sh [TRAINIT_BINARY] [RUNS]
#
# Each host's PID 1 is a shell that runs the launcher, then counts what is
# left in its PID namespace (a container whose boot file runs the launcher):
#   torchrun: python3 torchrun_patched.py --nnodes=2 --nproc_per_node=2
#             --node_rank=I --master_addr=<host 0> --master_port=18888
#             --rdzv_id=bench --rdzv_backend=static bench_rank.py MARKS 3
#   trainit:  trainit --mode torchrun -- bench_rank.py MARKS 3
#   none:     the baseline: a shell script that starts the host's two ranks
#             (python3 -u bench_rank.py MARKS 3) with torchrun's variables
#             and waits; it stops nothing
# with the platform's variables of tests/e2e/cluster.sh (MA_NUM_HOSTS=2,
# MA_NUM_GPUS=2, ...) and GLOO_SOCKET_IFNAME=eth0. The launchers take turns,
# run by run, so that the machine's other load falls on both alike.
# Figures per launcher (median [min–max] of RUNS):
#   (a) both hosts started → every rank's init_process_group returned; split
#       into the launcher's share (→ the last rank's interpreter runs its
#       first line; the namespace set-up and python3's own start, ~0.1 s
#       here, are in it for both) and the ranks' own (the last rank's first
#       line → the last init_process_group returned)
#       and, for trainit, its own share from its log: the times its states
#       resolve_peers, host_barrier (with the arena's preflight and commit)
#       and spawn took, on the slower host
#   (b) rank 3 (host 1) dies (os._exit(3)) while the others wait in a gloo
#       barrier → both hosts' launchers exited (at most 20 s: then the run
#       counts as ">20000" and its hosts are killed); (b') the same in runs
#       of their own where the others compute (sleep) with no collective in
#       flight, so that nothing but a launcher can end them (at most 10 s)
#   (c) the launcher's VmHWM and VmRSS per host once every rank joined
#       (torchrun: its agent; trainit: itself)
#   (d) processes left in each host's PID namespace 0.5 s after its
#       launcher exited, after the failure of (b) and of (b') ("hung": the
#       launcher had not exited); (a) and (c) are from the runs of (b)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
e2e=$here/../../tests/e2e
python=/usr/bin/python3

# --- one run of one launcher (a child process: cluster.sh's trap cleans up) -
if [ "${1:-}" = --one ]; then
  launcher=$2 survivors=$3 wait_s=$4
  source "$e2e/cluster.sh"
  exec 3>&1 1>&2
  install -m 0755 "$here/bench_rank.py" "$here/../job/torchrun_patched.py" "$E2E_DIR/bin/"
  cat >"$E2E_DIR/bin/no_launcher.sh" <<'SH'
#!/bin/sh
# no_launcher.sh HOST SCRIPT ARGS...: both local ranks, then waits for them
host=$1
shift
for local in 0 1; do
  RANK=$((host * 2 + local)) LOCAL_RANK=$local python3 -u "$@" &
done
wait
SH
  chmod 0755 "$E2E_DIR/bin/no_launcher.sh"
  cluster_up 2
  marks=$E2E_DIR/marks
  mkdir -p "$marks"
  chmod 0777 "$marks"
  start_host() {
    local i=$1 cmd
    local -a env
    mapfile -t env < <(host_env "$i")
    env+=(GLOO_SOCKET_IFNAME=eth0 HOME=/root)
    if [ "$launcher" = torchrun ]; then
      cmd="$python $E2E_DIR/bin/torchrun_patched.py --nnodes=2 --nproc_per_node=2 --node_rank=$i"
      cmd+=" --master_addr=$(peer_name 0) --master_port=18888 --rdzv_id=bench --rdzv_backend=static"
      cmd+=" $E2E_DIR/bin/bench_rank.py $marks 3 $survivors"
    elif [ "$launcher" = trainit ]; then
      cmd="$E2E_DIR/bin/trainit --mode torchrun -- $E2E_DIR/bin/bench_rank.py $marks 3 $survivors"
    else # none: the host's shell starts its two ranks with torchrun's variables itself
      env+=(WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 "MASTER_ADDR=$(peer_name 0)" MASTER_PORT=18888 OMP_NUM_THREADS=1)
      cmd="$E2E_DIR/bin/no_launcher.sh $i $E2E_DIR/bin/bench_rank.py $marks 3 $survivors"
    fi
    local d=$E2E_DIR/h$i
    # shellcheck disable=SC2016
    (ip netns exec "$(host_ns "$i")" unshare --pid --fork --mount-proc --uts \
      env -i "${env[@]}" sh -c 'hostname "$1"; $2 >"$3/out" 2>&1; echo $? >"$3/rc.tmp"; sleep 0.5
        ps -e -o pid=,ppid=,args= >"$3/ps"
        grep -v -e "^ *1 *0 sh -c " -e " ps -e -o " "$3/ps" | wc -l >"$3/left"
        mv "$3/rc.tmp" "$3/rc"' sh "$E2E_VJ-$E2E_TASK-$i" "$cmd" "$d") &
  }
  launcher_pid() { # torchrun's agent, or trainit, on host I
    local p
    for p in $(ip netns pids "$(host_ns "$1")"); do
      if tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -e "^$python [^ ]*torchrun_patched.py" -e "^[^ ]*/bin/trainit " -e "^/bin/sh [^ ]*/bin/no_launcher.sh"; then
        echo "$p"
        return 0
      fi
    done
    return 1
  }
  ms() { cut -d. -f1 "$1"; }
  t0=$(now_ms)
  start_host 0
  start_host 1
  for r in 0 1 2 3; do wait_file "$marks/init-$r" 120; done
  last_start=$(for r in 0 1 2 3; do ms "$marks/start-$r"; done | sort -n | tail -1)
  last_init=$(for r in 0 1 2 3; do ms "$marks/init-$r"; done | sort -n | tail -1)
  mem=""
  for i in 0 1; do
    pid=$(launcher_pid "$i") || fail "no launcher on host $i"
    mem+=" $(awk '/^VmHWM/ {h = $2} /^VmRSS/ {r = $2} END {print h, r}' "/proc/$pid/status")"
  done
  wait_file "$marks/failing" 60
  failed=$(ms "$marks/failing")
  deadline=$((SECONDS + wait_s))
  exit0="" exit1=""
  while [ -z "$exit0" ] || [ -z "$exit1" ]; do
    [ -n "$exit0" ] || { [ -f "$E2E_DIR/h0/rc.tmp" ] || [ -f "$E2E_DIR/h0/rc" ]; } && exit0=${exit0:-$(now_ms)}
    [ -n "$exit1" ] || { [ -f "$E2E_DIR/h1/rc.tmp" ] || [ -f "$E2E_DIR/h1/rc" ]; } && exit1=${exit1:-$(now_ms)}
    [ "$SECONDS" -lt "$deadline" ] || break
    sleep 0.005
  done
  if [ -n "$exit0" ] && [ -n "$exit1" ]; then
    fail_ms=$(((exit0 > exit1 ? exit0 : exit1) - failed))
  else
    fail_ms=">$((wait_s * 1000))"
  fi
  exits=("$exit0" "$exit1")
  left=""
  for i in 0 1; do
    if [ -n "${exits[$i]}" ]; then
      host_wait "$i" 5 >/dev/null
      left+=" $(cat "$E2E_DIR/h$i/left")"
      [ "$(cat "$E2E_DIR/h$i/left")" = 0 ] || e2e_log "$launcher: left on host $i: $(grep -v -e "^ *1 *0 sh -c " -e " ps -e -o " "$E2E_DIR/h$i/ps")"
    else
      left+=" hung"
    fi
  done
  # trainit's own share of the start, from its log: resolve_peers, host_barrier
  # (the arena's preflight and commit included) and spawn, on the slower host
  own=-
  if [ "$launcher" = trainit ]; then
    own=0
    for i in 0 1; do
      host_own=$(sed -n -E 's/^trainit: info: (resolve_peers -> host_barrier|host_barrier -> spawn|spawn -> running) after ([0-9.]+) s.*/\2/p' \
        "$E2E_DIR/h$i/out" | awk '{s += $1} END {printf "%d", s * 1000 + 0.5}')
      [ "$host_own" -le "$own" ] || own=$host_own
    done
  fi
  # a b c | fail | hwm0 rss0 hwm1 rss1 | left0 left1 | own
  echo "$((last_init - t0)) $((last_start - t0)) $((last_init - last_start)) $fail_ms$mem$left $own" >&3
  exit 0
fi

export TRAINIT_BIN=${1:-$here/../../build/release/init/trainit}
runs=${2:-5}
"$python" -c 'import torch' 2>/dev/null || {
  echo "bench/frameworks: needs Debian's python3-torch" >&2
  exit 1
}
[ "$(id -u)" = 0 ] || {
  echo "bench/frameworks: root only (network namespaces)" >&2
  exit 1
}

# median [min–max] of the numeric values; non-numeric ones (">20000", "hung")
# are counted beside it
median_range() {
  sort -n | awk '$1 ~ /^[0-9]+$/ {v[++n] = $1; next} {other[$1]++}
       END {
         if (n) printf "%s [%s–%s]", v[int((n + 1) / 2)], v[1], v[n]
         for (o in other) printf "%s%d× %s", (n ? "; " : ""), other[o], o
       }'
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
declare -A results
for ((r = 0; r < runs; r++)); do
  for launcher in torchrun trainit none; do
    line=$(bash "$0" --one "$launcher" barrier 20)
    echo "run $((r + 1)) $launcher, survivors in a barrier: $line" >&2
    results[$launcher]+="$line"$'\n'
    line=$(bash "$0" --one "$launcher" compute 10)
    echo "run $((r + 1)) $launcher, survivors computing: $line" >&2
    results[$launcher-compute]+="$line"$'\n'
  done
done
col() { printf '%s' "${results[$1]}" | awk -v c="$2" '{print $c}' | median_range; }
echo "command: bench/frameworks/run.sh $TRAINIT_BIN $runs"
echo "host: $(uname -sr), $(nproc) CPUs, load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after;" \
  "torch $("$python" -c 'import torch; print(torch.__version__)'); $runs runs of each launcher × (b)/(b'), taking turns;" \
  "hosts are network + PID namespaces of this machine"
echo "launchers (host I): torchrun_patched.py --nnodes=2 --nproc_per_node=2 --node_rank=I --master_addr=ma-job-e2e-worker-0.ma-job-e2e" \
  "--master_port=18888 --rdzv_id=bench --rdzv_backend=static bench_rank.py MARKS 3 | trainit --mode torchrun -- bench_rank.py MARKS 3" \
  "| none: sh no_launcher.sh I bench_rank.py MARKS 3 (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_* set by the script)"
echo
echo "| figure (2 hosts × 2 gloo ranks) | torchrun (Debian 1.13) | trainit --mode torchrun | no launcher (sh) | target |"
echo "|---|---|---|---|---|"
echo "| (a) start → every rank's init_process_group returned (ms) | $(col torchrun 1) | $(col trainit 1) | $(col none 1) | ≤ the ranks' own + 50 ms |"
echo "| (a) launcher's share: start → the last rank's first line (ms) | $(col torchrun 2) | $(col trainit 2) | $(col none 2) | |"
echo "| (a) the ranks' own: last first line → last init returned (ms) | $(col torchrun 3) | $(col trainit 3) | $(col none 3) | |"
echo "| (a) trainit's own share: resolve + barrier + preflight + spawn, slower host, from its log (ms) | — | $(col trainit 11) | — | ≤ 50 |"
echo "| (b) rank 3 (host 1) dies → both hosts' launchers exited (ms) | $(col torchrun 4) | $(col trainit 4) | $(col none 4) | ≤ 1000 |"
echo "| (b') the same, the others computing (no collective in flight) (ms) | $(col torchrun-compute 4) | $(col trainit-compute 4) | $(col none-compute 4) | ≤ 1000 |"
echo "| (c) launcher VmHWM, host 0 / host 1 (kB) | $(col torchrun 5) / $(col torchrun 7) | $(col trainit 5) / $(col trainit 7) | $(col none 5) / $(col none 7) | ≤ 2048 |"
echo "| (c) launcher VmRSS, host 0 / host 1 (kB) | $(col torchrun 6) / $(col torchrun 8) | $(col trainit 6) / $(col trainit 8) | $(col none 6) / $(col none 8) | |"
echo "| (d) processes left after the failed job of (b), host 0 / host 1 | $(col torchrun 9) / $(col torchrun 10) | $(col trainit 9) / $(col trainit 10) | $(col none 9) / $(col none 10) | 0 |"
echo "| (d') the same after (b') | $(col torchrun-compute 9) / $(col torchrun-compute 10) | $(col trainit-compute 9) / $(col trainit-compute 10) | $(col none-compute 9) / $(col none-compute 10) | 0 |"
