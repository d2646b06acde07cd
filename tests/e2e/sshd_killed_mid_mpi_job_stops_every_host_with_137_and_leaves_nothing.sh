#!/bin/bash
# --mode mpi on 2 hosts × 2 slots: mpirun has started every rank (host 1's
# through an orted that host 1's managed sshd started) when host 1's sshd is
# SIGKILLed. sshd's death fails the job: both hosts exit 137 (128 + SIGKILL,
# as sshd ended), both status files name host 1's sshd, and nothing is left
# on either host.
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/fault_checks.bash"

ssh-keygen -q -t ed25519 -N '' -C e2e -f "$E2E_DIR/key"
cluster_up 2
for i in 0 1; do
  install -m 0600 "$E2E_DIR/key" "$E2E_DIR/h$i/home/.ssh/id_ed25519"
  install -m 0644 "$E2E_DIR/key.pub" "$E2E_DIR/h$i/home/.ssh/authorized_keys"
done
marks="$E2E_DIR/marks"
mkdir -p "$marks"
cat >"$E2E_DIR/bin/mpi_rank.sh" <<RANK
#!/bin/sh
touch "$marks/started.\$OMPI_COMM_WORLD_RANK"
exec sleep 60
RANK
chmod 0755 "$E2E_DIR/bin/mpi_rank.sh"
for i in 0 1; do
  host_start "$i" MY_MPI_SLOTS=2 -- --mode mpi --peer-timeout 30 --grace 1 \
    --status-file "$E2E_DIR/h$i/status.json" -- mpi_rank.sh
done
for r in 0 1 2 3; do wait_file "$marks/started.$r" 60; done

# Host 1's sshd: the child of its trainit named sshd (its sessions are
# sshd's children, not trainit's).
sshd=$(ps -o pid=,comm= --ppid "$(trainit_pid 1)" | awk '$2 == "sshd" { print $1 }')
[ -n "$sshd" ] || fail "no sshd under host 1's trainit"
kill -KILL "$sshd"
expect_exit 1 137 10
expect_exit 0 137 10
for i in 0 1; do
  expect_status "$i" 137 "host 1" "sshd" "ended with 137"
  expect_found_nothing_left "$i"
done
expect_nothing_left
e2e_log PASS
