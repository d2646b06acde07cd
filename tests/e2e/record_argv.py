#!/usr/bin/env python3
"""A stand-in that records how it was started: writes its argv (one per
line) to $RECORD_DIR/<name>-host<MA_TASK_INDEX>.argv and the variables named
in $RECORD_VARS to ...env, then exits 0. Installed as `torchrun`, `msrun` and
`tf_train.py` for the e2e tests of the -exec modes and the TensorFlow preset."""
import os
import sys

name = os.path.basename(sys.argv[0])
base = f"{os.environ['RECORD_DIR']}/{name}-host{os.environ.get('MA_TASK_INDEX', '0')}"
with open(base + ".argv", "w") as f:
    f.write("\n".join(sys.argv[1:]) + "\n")
with open(base + ".env", "w") as f:
    for var in os.environ.get("RECORD_VARS", "").split():
        f.write(f"{var}={os.environ.get(var, '')}\n")
