#!/bin/bash
# --preflight devices on 2 hosts × 2 ranks (the fake device): each host checks
# its devices from its loop before it checks in, its heartbeats going on.
#  1. Host 1's devices take 4 s to open, past --peer-loss 2: the job is
#     healthy and ends 0 everywhere, and no rank starts on any host before
#     host 1's devices opened.
#  2. A device of host 1 hangs: every host ends with 79 and host 1's cause
#     (its device, its step), and no rank starts anywhere.
source "$(dirname "$0")/cluster.sh"
: "${TRAINIT_E2E_DEVICE_CHECK:?names trainit-device-check}" "${TRAINIT_E2E_FAKEDEV:?names the fake device plugin}"
cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
mkdir -p "$marks"
: >"$E2E_DIR/go"
slow="$E2E_DIR/bin/slow-device-check"
printf '#!/bin/sh\nsleep 4\ndate +%%s.%%N >"%s/devices-opened-h1"\nexec "%s" "$@"\n' "$marks" "$TRAINIT_E2E_DEVICE_CHECK" >"$slow"
chmod 0755 "$slow"

# host I, its check, then trainit's other arguments
start() {
  local i=$1 check=$2
  shift 2
  host_start_ascend "$i" "TRAINIT_COLL_BACKEND=$TRAINIT_E2E_FAKEDEV" "$@"
}

e2e_log "1. host 1's devices are slow to open"
for i in 0 1; do
  check=$TRAINIT_E2E_DEVICE_CHECK
  [ "$i" = 1 ] && check=$slow
  start "$i" "$check" -- --status-file "$E2E_DIR/h$i/status.json" --preflight devices --preflight-timeout 20 \
    --peer-loss 2 --device-check "$check" -- rank.py "$marks" until "$E2E_DIR/go"
done
expect_exit 0 0 60
expect_exit 1 0 60
expect_output 1 "device preflight: 2 devices passed"
opened=$(cat "$marks/devices-opened-h1")
for r in 0 1 2 3; do
  started=$(cat "$marks/started-$r")
  awk -v s="$started" -v o="$opened" 'BEGIN { exit !(s >= o) }' ||
    fail "rank $r started at $started, before host 1's devices opened at $opened"
done
e2e_log "every rank started after host 1's devices opened; both hosts exited 0"

e2e_log "2. a device of host 1 hangs"
rm -f "$marks"/started-* "$E2E_DIR"/h*/status.json
for i in 0 1; do
  fault=()
  [ "$i" = 1 ] && fault=(TRAINIT_FAKEDEV_FAULT=1:hang)
  start "$i" "$TRAINIT_E2E_DEVICE_CHECK" "${fault[@]}" -- --status-file "$E2E_DIR/h$i/status.json" \
    --preflight devices --preflight-timeout 2 --peer-loss 2 --device-check "$TRAINIT_E2E_DEVICE_CHECK" \
    -- rank.py "$marks" until "$E2E_DIR/go"
done
expect_exit 1 79 30
expect_exit 0 79 30
for i in 0 1; do
  status_of "$i" | grep -q '"cause": *"host 1 ([^)]*): device preflight failed: device 1: hung in step allreduce' ||
    fail "host $i's status does not name host 1's hung device: $(status_of "$i")"
done
started=$(find "$marks" -name 'started-*' | wc -l)
[ "$started" = 0 ] || fail "$started ranks started"
expect_nothing_left
e2e_log PASS
