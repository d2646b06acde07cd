#!/bin/sh
# The demo's training process: one per device, started by trainit.
echo "rank $RANK_ID/$RANK_SIZE on device $DEVICE_ID (job $JOB_ID), cwd $(pwd)"
echo "RANK_TABLE_FILE=$RANK_TABLE_FILE HCCL_CONNECT_TIMEOUT=$HCCL_CONNECT_TIMEOUT"
for step in 1 2 3; do
  sleep 0.2
  echo "step $step: loss $(( (100 - 10 * step - RANK_ID) ))"
done
echo "rank $RANK_ID done"
