#!/usr/bin/env python3
"""A stand-in that records how it was started: writes its argv (one per
line) to $RECORD_DIR/<name>-host<MA_TASK_INDEX>.argv and the variables named
in $RECORD_VARS to ...env ("NAME=value", or "NAME unset"), then exits 0.
With RECORD_KEY=VAR (one process per rank: VAR=RANK) the files are
<name>-host<MA_TASK_INDEX>-<VAR><value>.argv/.env. Installed as `torchrun`,
`msrun`, `tf_train.py` and the like for the e2e tests of the framework
modes' command lines and environments."""
import os
import sys

name = os.path.basename(sys.argv[0])
base = f"{os.environ['RECORD_DIR']}/{name}-host{os.environ.get('MA_TASK_INDEX', '0')}"
key = os.environ.get("RECORD_KEY")
if key:
    base += f"-{key}{os.environ.get(key, 'unset')}"
with open(base + ".argv", "w") as f:
    f.write("\n".join(sys.argv[1:]) + "\n")
with open(base + ".env", "w") as f:
    for var in os.environ.get("RECORD_VARS", "").split():
        f.write(f"{var}={os.environ[var]}\n" if var in os.environ else f"{var} unset\n")
print(f"recorded {os.path.basename(base)}", flush=True)
