#!/bin/bash
# Several hosts on the simulated cluster of tests/e2e (network namespaces,
# trainit as PID 1 per host): prints, per figure, the median and range of
# RUNS runs beside issue 10's target. Root only.
#
#   bench/cluster/run.sh [TRAINIT_BINARY] [RUNS]
#
# (a) a rank on host 1 exits 3 → every host's trainit exited (2 hosts × 2
#     ranks, Ascend rank table): from the rank's own clock before it exits to
#     the last host's exit code on disk;
# (b) host 0's namespace destroyed → hosts 1 and 2 exited, --peer-loss 2;
# (c) trainit's VmHWM on host 0 and host 1 while the 2 × 2 job runs;
# (d) --mode mpi, 2 hosts × 2 slots, real sshd and Open MPI: start of both
#     trainits → every MPI rank's line on host 0's console, and the whole job.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export TRAINIT_BIN=${1:-$here/../../build/release/init/trainit}
runs=${2:-5}
e2e=$here/../../tests/e2e

median_range() { sort -n | awk '{v[NR]=$1} END {printf "%s [%s–%s]", v[int((NR+1)/2)], v[1], v[NR]}'; }

one_run() { # prints "a_ms hwm0_kb hwm1_kb b_ms d_ranks_ms d_job_ms"
  bash -c '
    source "$1/cluster.sh"
    exec 3>&1 1>&2
    cluster_up 2; ascend_tables; marks=$E2E_DIR/marks
    for i in 0 1; do host_start_ascend $i -- --status-file $E2E_DIR/h$i/status.json -- rank.py $marks fail-if 3 3; done
    for r in 0 1 2; do wait_file $marks/started-$r 60; done
    hwm0=$(awk "/VmHWM/ {print \$2}" /proc/$(trainit_pid 0)/status); hwm1=$(awk "/VmHWM/ {print \$2}" /proc/$(trainit_pid 1)/status)
    wait_file $marks/failing-3 60; failed=$(python3 -c "print(int(float(open(\"$marks/failing-3\").read())*1000))")
    host_wait 0 10 >/dev/null; host_wait 1 10 >/dev/null; a=$(( $(date +%s%3N) - failed ))
    echo "$a $hwm0 $hwm1" >&3' sh "$e2e"
  bash -c '
    source "$1/cluster.sh"
    exec 3>&1 1>&2
    cluster_up 3; E2E_GPUS=1 ascend_tables; marks=$E2E_DIR/marks
    for i in 0 1 2; do E2E_GPUS=1 host_start_ascend $i -- --status-file $E2E_DIR/h$i/status.json --peer-loss 2 -- rank.py $marks wait; done
    for r in 0 1 2; do wait_file $marks/started-$r 60; done
    host_kill_namespace 0; lost=$(date +%s%3N)
    host_wait 1 10 >/dev/null; host_wait 2 10 >/dev/null
    echo "$(( $(date +%s%3N) - lost ))" >&3' sh "$e2e"
  bash -c '
    source "$1/cluster.sh"
    exec 3>&1 1>&2
    mpicc -O1 -o $E2E_DIR/bin/mpi_allreduce $1/mpi_allreduce.c
    ssh-keygen -q -t ed25519 -N "" -C bench -f $E2E_DIR/key
    cluster_up 2
    for i in 0 1; do install -m 0600 $E2E_DIR/key $E2E_DIR/h$i/home/.ssh/id_ed25519; install -m 0644 $E2E_DIR/key.pub $E2E_DIR/h$i/home/.ssh/authorized_keys; done
    start=$(date +%s%3N)
    for i in 0 1; do host_start $i MY_MPI_SLOTS=2 -- --mode mpi -- mpi_allreduce; done
    deadline=$((SECONDS + 60))
    until [ "$(grep -c "mpi rank" $E2E_DIR/h0/out 2>/dev/null)" = 4 ]; do [ $SECONDS -lt $deadline ] || exit 1; sleep 0.005; done
    ranks=$(( $(date +%s%3N) - start ))
    host_wait 0 60 >/dev/null; host_wait 1 60 >/dev/null
    echo "$ranks $(( $(date +%s%3N) - start ))" >&3' sh "$e2e"
}

results=$(for ((r = 0; r < runs; r++)); do one_run | paste -sd' '; done)
col() { echo "$results" | awk -v c="$1" '{print $c}' | median_range; }
echo "command: bench/cluster/run.sh $TRAINIT_BIN $runs"
echo "host: $(uname -sr), $(nproc) CPUs; $runs runs each; hosts are network namespaces of this machine"
echo
echo "| figure | trainit, median [min–max] | target |"
echo "|---|---|---|"
echo "| (a) rank on host 1 exits 3 → every host stopped (2 × 2, Ascend) | $(col 1) ms | ≤ 1000 ms |"
echo "| (b) host 0 lost → hosts 1, 2 stopped, --peer-loss 2 | $(col 4) ms | ≤ 3000 ms (peer loss + 1 s) |"
echo "| (c) trainit VmHWM during the job, host 0 / host 1 | $(col 2) / $(col 3) kB | ≤ 2 MB |"
echo "| (d) MPI 2 × 2: start → 4 ranks' allreduce lines on host 0 | $(col 5) ms | sshd start + mpirun's own + 50 ms |"
echo "| (d) MPI 2 × 2: start → both hosts exited 0 | $(col 6) ms | |"
