"""Runs /usr/bin/python3 -m torch.distributed.run with one fix applied in
memory, for bench_job only; nothing on disk is changed.

torch 1.13's Std.from_str("0") maps each digit to a member by iterating the
IntFlag class. On Python 3.11 iterating a Flag skips the zero-valued NONE, so
"0" (the default of --redirects and --tee) becomes None and torchrun crashes
at start in to_map(). This wrapper replaces from_str with a version that
builds the member from the integer, then runs the module as `-m` would.
"""
import re
import runpy
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v)) for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match: <{api._VALUE_REGEX}> or <{api._MAPPING_REGEX}>")


api.Std.from_str = classmethod(_from_str)
sys.argv[0] = "torch.distributed.run"
runpy.run_module("torch.distributed.run", run_name="__main__", alter_sys=True)
