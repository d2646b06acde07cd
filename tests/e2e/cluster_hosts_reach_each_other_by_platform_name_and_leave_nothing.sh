#!/bin/bash
# The harness itself: three hosts, each with trainit as PID 1, resolve every
# platform peer name to its address, reach each other over the bridge, have
# their own host name and a private home; and a scenario that fails leaves
# no namespace, file or directory behind.
source "$(dirname "$0")/cluster.sh"

# A failing scenario, in a process of its own: its EXIT trap must clean up.
record="$E2E_DIR/failed-scenario"
if bash -c 'source "$1"; cluster_up 2; echo "$E2E_ID $E2E_DIR" >"$2"; exit 3' sh "$(dirname "$0")/cluster.sh" "$record" 2>/dev/null; then
  fail "the failing scenario did not fail"
fi
read -r failed_id failed_dir <"$record"
ip netns list | awk '{print $1}' | grep -q "^$failed_id-" && fail "a failed scenario left namespaces: $(ip netns list | grep "^$failed_id-")"
ls -d /etc/netns/"$failed_id"-* 2>/dev/null && fail "a failed scenario left /etc/netns entries"
[ ! -e "$failed_dir" ] || fail "a failed scenario left $failed_dir"
e2e_log "a failed scenario cleaned up after itself"

cluster_up 3
# Host 2 listens; hosts 0 and 1 resolve every name and connect to host 2.
check='
import os, socket, sys
me, hosts, vj, task = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
assert socket.gethostname() == f"{vj}-{task}-{me}", socket.gethostname()
for i in range(hosts):
    name = f"{vj}-{task}-{i}.{vj}"
    print(name, socket.gethostbyname(name), flush=True)
open(os.path.expanduser("~/.ssh/probe"), "w").write(str(me))
if me == hosts - 1:
    s = socket.create_server(("0.0.0.0", 47000))
    for _ in range(hosts - 1):
        c, addr = s.accept(); c.sendall(b"hello from %d" % me); c.close()
else:
    for attempt in range(100):
        try:
            c = socket.create_connection((f"{vj}-{task}-{hosts - 1}.{vj}", 47000), timeout=5); break
        except OSError:
            import time; time.sleep(0.05)
    print(c.recv(64).decode(), flush=True)
'
for i in 0 1 2; do
  host_start "$i" -- python3 -c "$check" "$i" 3 "$E2E_VJ" "$E2E_TASK"
done
for i in 0 1 2; do
  expect_exit "$i" 0 30
  for j in 0 1 2; do
    expect_output "$i" "$(peer_name "$j") $(host_ip "$j")"
  done
  [ "$(cat "$E2E_DIR/h$i/home/.ssh/probe")" = "$i" ] || fail "host $i's home is not its own"
done
expect_output 0 "hello from 2"
expect_output 1 "hello from 2"
expect_nothing_left
e2e_log "PASS"
