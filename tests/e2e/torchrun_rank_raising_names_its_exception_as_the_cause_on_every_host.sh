#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun, Debian's PyTorch: main() of
# ddp_record.py is decorated with @record, and rank 3 (host 1) raises
# ValueError in train_step() after two all_reduce steps. Each
# rank has a TORCHELASTIC_ERROR_FILE of its own; host 1 reads rank 3's, and
# on both hosts the cause (log line, status file, termination message) names
# host 1, rank 3, the exception and its innermost frame, the code and the
# state, as torchrun's "Root Cause (first observed failure)" does; both exit
# 1 and leave nothing running. While the job runs, `trainit status` inside
# host 1 (as `kubectl exec` runs it, the status file at its default path)
# exits 0; once it ended, `trainit status` on host 0's file exits 1.
source "$(dirname "$0")/cluster.sh"
install -m 0755 "$(dirname "$0")/ddp_record.py" "$E2E_DIR/bin/ddp_record.py"
cluster_up 2
marks="$E2E_DIR/marks"
mkdir -p "$marks"
for i in 0 1; do
  : >"$E2E_DIR/h$i/termination-log"
done
host_start 0 GLOO_SOCKET_IFNAME=eth0 -- --mode torchrun --grace 5 --status-file "$E2E_DIR/h0/status.json" \
  --termination-log "$E2E_DIR/h0/termination-log" -- "$E2E_DIR/bin/ddp_record.py" "$marks" 3 2 "$marks/go"
host_start 1 GLOO_SOCKET_IFNAME=eth0 -- --mode torchrun --grace 5 \
  --termination-log "$E2E_DIR/h1/termination-log" -- "$E2E_DIR/bin/ddp_record.py" "$marks" 3 2 "$marks/go"
for rank in 0 1 2 3; do
  wait_file "$marks/joined-$rank" 120
done

# The probe, inside host 1: its own /tmp, the status file's default name.
pid=$(trainit_pid 1) || fail "no trainit in host 1"
probe() {
  nsenter --target "$pid" --mount --uts --pid -- env -i "MA_CURRENT_INSTANCE_NAME=$E2E_VJ-$E2E_TASK-1" \
    ${TRAINIT_E2E_EMULATOR:+"$TRAINIT_E2E_EMULATOR"} "$E2E_DIR/bin/trainit" status
}
running=$(probe) || fail "trainit status exited $? while the job runs: $running"
grep -q "^state   running since " <<<"$running" || fail "trainit status while the job runs: $running"
grep -q "^rank-3-local-1 .* running " <<<"$running" || fail "rank 3 is not shown running: $running"
e2e_log "trainit status inside host 1 exits 0 while the job runs"

touch "$marks/go"
for i in 0 1; do
  expect_exit "$i" 1 60
done

line=$(grep -n 'raise ValueError' "$E2E_DIR/bin/ddp_record.py" | cut -d: -f1)
root_cause="exited with 1: ValueError: bad batch at step 2 at $E2E_DIR/bin/ddp_record.py:$line in train_step"
where="host 1 ($(peer_name 1)) rank 3: rank-3-local-1 (pid "
for i in 0 1; do
  message=$(cat "$E2E_DIR/h$i/termination-log")
  case "$message" in
    "$where"*"$root_cause; exit 1 in state running") ;;
    *) fail "host $i's termination message: '$message'" ;;
  esac
  expect_output "$i" "$root_cause"
done
grep -qF "$root_cause" "$E2E_DIR/h0/status.json" || fail "host 0's status file lacks the root cause"

set +e
ended=$(${TRAINIT_E2E_EMULATOR:+"$TRAINIT_E2E_EMULATOR"} "$E2E_DIR/bin/trainit" status --status-file "$E2E_DIR/h0/status.json")
rc=$?
set -e
[ "$rc" = 1 ] || fail "trainit status on host 0's ended job exited $rc: $ended"
grep -qF "cause   $where" <<<"$ended" || fail "trainit status shows no cause: $ended"
e2e_log "every host names rank 3's ValueError at ddp_record.py:$line; trainit status exits 1 after"
expect_nothing_left
e2e_log PASS
