#!/bin/sh
# The rank of bench/cluster/scale.sh: one per host (torchrun, MA_NUM_GPUS=1),
# a dash script of builtins only, so that 1,024 of them starting at once cost
# the machine little besides the exec of the shell itself.
#
#   scale_rank.sh HOST_DIR FAIL_FIFO FAILING_RANK
#
# It copies its host's status file, HOST_DIR/status.json, to
# HOST_DIR/started: what trainit wrote when it spawned the rank, its own
# timestamp of the spawn ("since" of state spawn or running). Then the rank
# FAILING_RANK waits on FAIL_FIFO and exits 3 once the bench writes to it;
# every other rank waits on its host's own FIFO, HOST_DIR/hold, which nobody
# writes, until trainit stops it. (The bench reads the copies seconds after
# the last one appeared: no rename needed.)
host=$1 fail=$2 failing=$3
while IFS= read -r line; do
  printf '%s\n' "$line"
done <"$host/status.json" >"$host/started"
if [ "$RANK" = "$failing" ]; then
  read -r _ <"$fail"
  exit 3
fi
read -r _ <"$host/hold"
