#!/bin/bash
# 2 hosts × 2 ranks, --mode torchrun --restart on-failure --max-restarts 1:
# rank 3 (host 1) exits 3, so every host stops its ranks to start again
# together. Host 1's rank 2 ignores SIGTERM: host 1 is still stopping (the
# 2 s grace) when its link is cut (eth0 down). The restart cannot meet at
# the barrier: each host loses the other within --peer-loss, and that ends
# the job there, with 69 and the lost host named, instead of starting it
# again (and again) alone. Nothing is left on either host.
source "$(dirname "$0")/cluster.sh"
source "$(dirname "$0")/fault_checks.bash"

cluster_up 2
marks="$E2E_DIR/marks"
mkdir -p "$marks"
cat >"$E2E_DIR/bin/restart_rank.sh" <<RANK
#!/bin/sh
touch "$marks/start.\$RANK.\$TORCHELASTIC_RESTART_COUNT"
[ "\$TORCHELASTIC_RESTART_COUNT" = 0 ] || exec sleep 60
case "\$RANK" in
  3) while [ ! -e "$marks/fail" ]; do sleep 0.02; done; exit 3 ;;
  2) trap 'touch "$marks/term.2"' TERM; while :; do sleep 0.05; done ;;
  *) exec sleep 60 ;;
esac
RANK
chmod 0755 "$E2E_DIR/bin/restart_rank.sh"
for i in 0 1; do
  host_start "$i" -- --mode torchrun --restart on-failure --max-restarts 1 --grace 2 --peer-loss 2 \
    --barrier-timeout 60 --status-file "$E2E_DIR/h$i/status.json" -- restart_rank.sh
done
for r in 0 1 2 3; do wait_file "$marks/start.$r.0" 30; done
touch "$marks/fail"
wait_file "$marks/term.2" 10 # host 1 is stopping, for 2 s
ip -n "$(host_ns 1)" link set eth0 down
cut=$(now_ms)
expect_exit 0 69 10
expect_exit 1 69 10
took=$(($(now_ms) - cut))
[ "$took" -le 6000 ] || fail "the hosts exited $took ms after the cut (grace 2 s, peer loss 2 s)"
e2e_log "both hosts exited $took ms after the cut"
expect_status 0 69 "host 1" "lost"
expect_status 1 69 "host 0" "lost"
for r in 0 1 2 3; do
  [ ! -e "$marks/start.$r.1" ] || fail "rank $r started again without its peers"
done
for i in 0 1; do expect_found_nothing_left "$i"; done
expect_nothing_left
e2e_log PASS
