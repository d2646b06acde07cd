#!/bin/bash
# --mode mpi, 2 hosts × 2 slots, real sshd and real Open MPI: every host
# starts its own sshd (a per-job config, key-only; up when it says READY=1 on
# the NOTIFY_SOCKET trainit serves it), host 0 waits for every
# peer's sshd and the barrier, then mpirun runs an MPI program that does an
# allreduce and checks it on all 4 ranks. Both hosts exit 0; no sshd, orted
# or rank is left anywhere. The same again as a non-root user.
source "$(dirname "$0")/cluster.sh"
command -v mpicc >/dev/null || fail "mpicc missing (container/deps.sh installs libopenmpi-dev)"
mpicc -O1 -o "$E2E_DIR/bin/mpi_allreduce" "$(dirname "$0")/mpi_allreduce.c"

# One key for the cluster: each host's private home has it and trusts it.
ssh-keygen -q -t ed25519 -N '' -C e2e -f "$E2E_DIR/key"
run_job() {
  local i
  for i in 0 1; do
    install -m 0600 "$E2E_DIR/key" "$E2E_DIR/h$i/home/.ssh/id_ed25519"
    install -m 0644 "$E2E_DIR/key.pub" "$E2E_DIR/h$i/home/.ssh/authorized_keys"
  done
  for i in 0 1; do
    host_start "$i" MY_MPI_SLOTS=2 -- --mode mpi --peer-timeout 30 -- mpi_allreduce
  done
  expect_exit 0 0 120
  expect_exit 1 0 30
  local r
  for r in 0 1 2 3; do
    expect_output 0 "mpi rank $r of 4 on"
  done
  expect_output 0 "allreduce 10 (want 10)"
  grep -q "on $E2E_VJ-$E2E_TASK-1:" "$E2E_DIR/h0/out" || fail "no rank ran on host 1"
  # Debian's sshd says READY=1 on the NOTIFY_SOCKET trainit serves it.
  expect_output 0 "sshd said READY=1"
  expect_output 1 "sshd said READY=1"
  # Host 1 runs no rank of its own: it says so, and never that its ranks
  # exited 0 (it had none).
  expect_output 1 "this host runs no rank of its own; waiting for the other hosts"
  ! grep -q "every rank of this host exited 0" "$E2E_DIR/h1/out" || fail "host 1 reports ranks it never had"
  # A normal job draws no error or warning from Open MPI, on any host
  # (each orted and rank of host 1 used to miss host 0's -tune file). sshd's
  # own lines are left out: trainit's readiness probe may draw a
  # "Connection reset" from it, which is no Open MPI complaint. So is
  # mpirun's own race with the ssh child it forks: its setpgid() of the
  # child after the child's exec fails with EACCES (POSIX says so), a
  # warning a loaded machine draws now and then.
  local noise
  for i in 0 1; do
    noise=$(grep -iE 'unable to locate|warning|error|not found|^(\[mpirun\] )?-{20,}' "$E2E_DIR/h$i/out" |
      grep -vE '^(trainit: |\[sshd\] )' |
      grep -vE 'plm:rsh: Warning: setpgid\([0-9]+,[0-9]+\) failed in parent with errno=Permission denied' || true)
    [ -z "$noise" ] || fail "host $i: Open MPI complained on a normal job: $(echo "$noise" | head -3)"
  done
  expect_nothing_left
}

cluster_up 2
run_job
e2e_log "as root: PASS"

# A user the hosts have and the machine need not (a fresh machine has none).
cluster_user trainit-e2e
for i in 0 1; do rm -f "$E2E_DIR/h$i/rc" "$E2E_DIR/h$i/out"; done
run_job
e2e_log "as $E2E_USER (uid $E2E_UID): PASS"
