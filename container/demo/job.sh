#!/bin/sh
# The demo job: runs under trainit as PID 1 and shows what an init must do.
say() { echo "[job] $*"; }

say "pid $$; PID 1 is '$(cat /proc/1/comm)'"
trap 'say "got SIGUSR1 (sent to PID 1, forwarded by trainit)"' USR1
trap 'say "got SIGTERM: cleaning up"; sleep 0.2; say "done, exiting with 143"; exit 143' TERM

for step in 1 2 3; do
  say "step $step: leaving an orphan behind"
  (sleep 0.05 &)   # the subshell exits at once: its child is reparented to PID 1
  sleep 0.2
done
zombies=$(grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l)
say "zombies left in the namespace: $zombies"

say "sending SIGUSR1 to PID 1"
kill -USR1 1
sleep 0.2
say "sending SIGTERM to PID 1 (docker stop does this)"
kill -TERM 1
sleep 5 &
wait $!
say "SIGTERM never came: trainit is broken"
exit 1
