#!/bin/bash
# torchrun's job, natively, against Debian's torchrun (PyTorch 1.13, patched
# in memory as bench/job does: Std.from_str is broken on Python 3.11), side
# by side in one run: 2 hosts × 2 gloo ranks on the simulated cluster of
# tests/e2e (a network namespace per host). Root only.
#
#   bench/frameworks/run.sh [TRAINIT_BINARY] [RUNS]
#
# Each host's PID 1 is a shell that runs the launcher, then lists what is
# left in its PID namespace (a container whose boot file runs torchrun):
#   torchrun: python3 -m torch.distributed.run --nnodes=2 --nproc_per_node=2
#             --node_rank=I --master_addr=<host 0> --master_port=18888
#             --rdzv_id=bench --rdzv_backend=static bench_rank.py ...
#   trainit:  trainit --mode torchrun -- bench_rank.py ...
# Figures per launcher (median [min–max] of RUNS):
#   (a) start of both launchers → every rank's init_process_group returned,
#       and the ranks' own share of it (interpreter start → init returned,
#       the slowest rank); the launcher's cost is the difference
#   (b) a rank on host 1 exits 3 → both launchers exited (at most 20 s:
#       then the figure is ">20000" and the hosts are killed)
#   (c) the launcher's VmHWM per host (torchrun: its agent; trainit: itself)
#   (d) processes left in host 1's namespace after its launcher exited
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export TRAINIT_BIN=${1:-$here/../../build/release/init/trainit}
runs=${2:-3}
e2e=$here/../../tests/e2e
python=/usr/bin/python3
"$python" -c 'import torch' 2>/dev/null || { echo "bench/frameworks: needs Debian's python3-torch" >&2; exit 1; }

median_range() { sort -n | awk '{v[NR]=$1} END {printf "%s [%s–%s]", v[int((NR+1)/2)], v[1], v[NR]}'; }

# one_run LAUNCHER FAIL_RANK: prints "start_to_init ranks_own fail_to_stopped hwm0 hwm1 left"
one_run() {
  bash -c '
    source "$1/cluster.sh"
    exec 3>&1 1>&2
    launcher=$2 fail_rank=$3 here=$4 python=$5
    install -m 0755 "$here/bench_rank.py" "$here/../job/torchrun_patched.py" "$E2E_DIR/bin/"
    cluster_up 2
    marks=$E2E_DIR/marks; mkdir -p "$marks"; chmod 0777 "$marks"
    start_host() {
      local i=$1 cmd
      local -a env
      mapfile -t env < <(host_env "$i")
      env+=(GLOO_SOCKET_IFNAME=eth0 HOME=/root)
      if [ "$launcher" = torchrun ]; then
        cmd="$python $E2E_DIR/bin/torchrun_patched.py --nnodes=2 --nproc_per_node=2 --node_rank=$i --master_addr=$(peer_name 0) --master_port=18888 --rdzv_id=bench --rdzv_backend=static $E2E_DIR/bin/bench_rank.py $marks $fail_rank"
      else
        cmd="$E2E_DIR/bin/trainit --mode torchrun -- $E2E_DIR/bin/bench_rank.py $marks $fail_rank"
      fi
      ( ip netns exec "$(host_ns "$i")" unshare --pid --fork --mount-proc --uts \
          env -i "${env[@]}" sh -c "hostname $E2E_VJ-$E2E_TASK-$i; $cmd >$E2E_DIR/h$i/out 2>&1; echo \$? >$E2E_DIR/h$i/rc.tmp; sleep 0.5;
                                  ps -e -o pid=,comm= | grep -v -e \" 1 sh\$\" -e \" ps\$\" -e \" grep\$\" -e \" wc\$\" | wc -l >$E2E_DIR/h$i/left; mv $E2E_DIR/h$i/rc.tmp $E2E_DIR/h$i/rc" ) &
    }
    launcher_pid() {  # torchrun'"'"'s agent, or trainit, on host I
      local p
      for p in $(ip netns pids "$(host_ns "$1")"); do
        if tr "\0" " " <"/proc/$p/cmdline" 2>/dev/null | grep -q -e "^$python [^ ]*torchrun_patched.py" -e "^[^ ]*/bin/trainit "; then
          echo "$p"
          return 0
        fi
      done
      return 1
    }
    t0=$(date +%s%3N)
    start_host 0; start_host 1
    for r in 0 1 2 3; do wait_file "$marks/init-$r" 120; done
    init=$(for f in "$marks"/init-*; do cat "$f"; echo; done | sort -n | tail -1); init=${init%.*}
    own=$(for r in 0 1 2 3; do awk -v a="$(cat "$marks/init-$r")" -v b="$(cat "$marks/start-$r")" "BEGIN {printf \"%d\n\", a - b}"; done | sort -n | tail -1)
    hwm0=$(awk "/VmHWM/ {print \$2}" /proc/$(launcher_pid 0)/status); hwm1=$(awk "/VmHWM/ {print \$2}" /proc/$(launcher_pid 1)/status)
    wait_file "$marks/failing" 60; failed=$(cat "$marks/failing"); failed=${failed%.*}
    deadline=$((SECONDS + 20)); exit0=""; exit1=""
    while [ -z "$exit0" ] || [ -z "$exit1" ]; do
      [ -n "$exit0" ] || { [ -f "$E2E_DIR/h0/rc.tmp" ] || [ -f "$E2E_DIR/h0/rc" ]; } && exit0=${exit0:-$(date +%s%3N)}
      [ -n "$exit1" ] || { [ -f "$E2E_DIR/h1/rc.tmp" ] || [ -f "$E2E_DIR/h1/rc" ]; } && exit1=${exit1:-$(date +%s%3N)}
      [ $SECONDS -lt $deadline ] || break
      sleep 0.01
    done
    if [ -n "$exit0" ] && [ -n "$exit1" ]; then
      fail_ms=$(( (exit0 > exit1 ? exit0 : exit1) - failed ))
      host_wait 1 5 >/dev/null
    else
      fail_ms=">20000"
    fi
    left=$(cat "$E2E_DIR/h1/left" 2>/dev/null || echo "?")
    echo "$((init - t0)) $own $fail_ms $hwm0 $hwm1 $left" >&3' sh "$e2e" "$1" "$2" "$here" "$python"
}

declare -A results
for launcher in torchrun trainit; do
  results[$launcher]=$(for ((r = 0; r < runs; r++)); do one_run "$launcher" 3 | paste -sd' '; done)
done
col() { echo "${results[$1]}" | awk -v c="$2" '{print $c}' | median_range; }
echo "command: bench/frameworks/run.sh $TRAINIT_BIN $runs"
echo "host: $(uname -sr), $(nproc) CPUs; torch $("$python" -c 'import torch; print(torch.__version__)'); $runs runs each; hosts are network namespaces of this machine"
echo
echo "| figure (2 hosts × 2 gloo ranks) | torchrun | trainit --mode torchrun | target |"
echo "|---|---|---|---|"
echo "| (a) start → every rank's init_process_group returned (ms) | $(col torchrun 1) | $(col trainit 1) | ≤ the ranks' own + 50 ms |"
echo "| (a) of which the ranks' own: interpreter start → init returned, slowest rank (ms) | $(col torchrun 2) | $(col trainit 2) | |"
echo "| (b) a rank on host 1 exits 3 → both hosts' launchers exited (ms) | $(col torchrun 3) | $(col trainit 3) | ≤ 1000 ms |"
echo "| (c) launcher VmHWM, host 0 / host 1 (kB) | $(col torchrun 4) / $(col torchrun 5) | $(col trainit 4) / $(col trainit 5) | ≤ 2 MB |"
echo "| (d) processes left in host 1's namespace after its launcher exited | $(col torchrun 6) | $(col trainit 6) | 0 |"
