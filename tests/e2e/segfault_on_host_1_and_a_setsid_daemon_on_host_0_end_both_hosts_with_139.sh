#!/bin/bash
# An Ascend job on 2 hosts × 2 devices. Rank 0 (host 0) leaves a setsid
# daemon that ignores SIGTERM; rank 3 (host 1) then dies of SIGSEGV. Every
# host exits 139, both status files name host 1 rank 3 and the signal, host
# 0's daemon is SIGKILLed once the grace is over (the job does not end while
# it lives), and nothing is left on either host.
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/fault_checks.bash"

cluster_up 2
ascend_tables
marks="$E2E_DIR/marks"
mkdir -p "$marks"
cat >"$E2E_DIR/bin/fault_rank.sh" <<RANK
#!/bin/bash
touch "$marks/started.\$RANK_ID"
case "\$RANK_ID" in
  0) setsid bash -c 'trap "" TERM; echo \$\$ >"$marks/daemon.tmp"; mv "$marks/daemon.tmp" "$marks/daemon"; exec sleep 300' </dev/null >/dev/null 2>&1 &
     exec sleep 60 ;;
  3) while [ ! -e "$marks/daemon" ]; do sleep 0.02; done; kill -SEGV \$\$ ;;
  *) exec sleep 60 ;;
esac
RANK
chmod 0755 "$E2E_DIR/bin/fault_rank.sh"
for i in 0 1; do
  host_start_ascend "$i" -- --status-file "$E2E_DIR/h$i/status.json" --grace 1 -- fault_rank.sh
done
expect_exit 1 139 20
expect_exit 0 139 10
for i in 0 1; do
  expect_status "$i" 139 "host 1 " "rank 3:" "proc-rank-3-device-1" "SIGSEGV"
  expect_found_nothing_left "$i"
done
expect_output 0 "processes still ran 1.000 s after SIGTERM: SIGKILL"
expect_nothing_left
e2e_log PASS
