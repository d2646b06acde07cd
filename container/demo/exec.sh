#!/bin/sh
# Runs the demo job with trainit as PID 1 of a new PID namespace (what a
# container gives it) and checks the exit code it propagates.
# Usage: container/demo/exec.sh [path/to/trainit]
set -u
here=$(cd "$(dirname "$0")" && pwd)
trainit=${1:-}
[ -n "$trainit" ] || trainit=$here/../../build/release/init/trainit  # the demo's and the tests' build

echo "== trainit $("$trainit" --version | cut -d' ' -f3) as PID 1: $trainit -v -w -- job.sh"
unshare --pid --fork --mount-proc --kill-child "$trainit" -v -w -- "$here/job.sh"
code=$?
echo "== trainit exited with $code (128 + SIGTERM = 143: the job's own code, passed through)"
[ "$code" -eq 143 ]
