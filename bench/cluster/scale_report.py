#!/usr/bin/env python3
"""The figures of bench/cluster/scale.sh from what its hosts left behind.

  scale_report.py header               the table's header
  scale_report.py row DIR N STEADY PEER_LOSS
                                       one row: the runs job, cut and kill of
                                       N hosts under DIR (PEER_LOSS: the one
                                       asked for, the cut and kill runs')

Every time is trainit's own where it can be: the spawn stamp ("since") in
the status file each rank copied when it started, the durations of trainit's
"A -> B after S s" log lines (-v) counted from it, and the "since" of state
exit in each host's final status file. The bench's clock (the same wall
clock) gives only the moments it acted: the last host's launch, the cut, the
kill.
"""
import json
import re
import sys

TRANSITION = re.compile(r"(\w+) -> (\w+) after ([0-9.]+) s")


class Host:
    """One host's moments in one run, in seconds since the epoch."""

    def __init__(self, run_dir, i):
        self.start = self.checkin = self.running = self.stopping = self.exit = None
        self.code = None
        with open(f"{run_dir}/h{i}/started") as f:
            started = json.load(f)
        durations = {}
        with open(f"{run_dir}/h{i}/out", errors="replace") as f:
            for line in f:
                m = TRANSITION.search(line)
                if m:
                    durations.setdefault((m.group(1), m.group(2)), float(m.group(3)))
        to_running = durations.get(("spawn", "running"), 0.0)
        spawn = started["since"] if started["state"] == "spawn" else started["since"] - to_running
        self.running = spawn + to_running
        if ("host_barrier", "spawn") in durations:
            self.checkin = spawn - durations[("host_barrier", "spawn")]
            self.start = self.checkin - durations.get(("resolve_peers", "host_barrier"), 0.0)
        if ("running", "stopping") in durations:
            self.stopping = self.running + durations[("running", "stopping")]
        try:
            with open(f"{run_dir}/h{i}/status.json") as f:
                final = json.load(f)
            if final["state"] == "exit":
                self.exit, self.code = final["since"], final["exit_code"]
        except (OSError, ValueError):
            pass


def read(path):
    with open(path) as f:
        return f.read().split()


def ms(seconds):
    return "-" if seconds is None else f"{seconds * 1000:.0f}"


def latest(values, what):
    values = [v for v in values if v is not None]
    if not values:
        sys.exit(f"scale_report: no host has {what}")
    return max(values)


def row(base, n, steady, default_loss):
    job = [Host(f"{base}/job", i) for i in range(n)]
    codes = sorted({h.code for h in job}, key=str)
    if codes != [3]:
        sys.exit(f"scale_report: N={n}: the job's hosts exited {codes}, expected 3 on every host")
    failed = job[n - 1].stopping  # the failing rank's host saw it exit
    start = latest([h.running for h in job], "a spawn") - latest([h.start for h in job], "a start")
    barrier = latest([h.running for h in job], "a spawn") - latest([h.checkin for h in job], "a check-in")
    fanout = latest([h.stopping for h in job], "a stop") - failed
    end = latest([h.exit for h in job], "an exit") - failed

    def lost(run):
        trigger = float(read(f"{base}/{run}/trigger")[0])
        if trigger == 0:
            return None  # the job stopped before every rank started
        others = [Host(f"{base}/{run}", i) for i in range(n - 1)]
        if any(h.stopping is not None and h.stopping < trigger for h in others):
            return None  # the job had stopped already: nothing to measure
        return latest([h.stopping for h in others], "a stop") - trigger

    def lost_cell(run):
        loss = read(f"{base}/{run}/peer_loss")[0]
        figure = ms(lost(run))
        return figure if loss == default_loss else f"{figure} (--peer-loss {loss})"

    before = [float(v) for v in read(f"{base}/job/host0_before")]
    after = [float(v) for v in read(f"{base}/job/host0_after")]
    window = (after[0] - before[0]) / 1e9
    cpu_job = float(read(f"{base}/job/cpu0")[0]) / 1e9
    rate = [(a - b) / steady for a, b in zip(after[1:3], before[1:3])]
    print(
        f"| {n} | {ms(start)} | {ms(barrier)} | {ms(fanout)} | {ms(end)} | {lost_cell('cut')} | {lost_cell('kill')} "
        f"| {after[3] / 1024:.1f} | {cpu_job:.3f} | {100 * window / steady:.2f} % "
        f"| {rate[0]:.0f} / {rate[1]:.0f} | {after[4]:.0f} |"
    )


def header():
    print(
        "| hosts | last trainit started → every rank spawned (ms) | barrier: last check-in → every rank spawned (ms) "
        "| stop fan-out: failing rank's exit → last host stopping (ms) | stop end to end: → last trainit exited (ms) "
        "| lost, link cut: → every other host stopping (ms) | lost, trainit killed + namespace deleted (ms) "
        "| host 0 VmHWM (MB) | host 0 CPU, whole job (s) | host 0 CPU, steady (heartbeats) "
        "| host 0 eth0 bytes/s in / out, steady | host 0 listen drops |"
    )
    print("|---:" * 12 + "|")


if __name__ == "__main__":
    if sys.argv[1] == "header":
        header()
    else:
        row(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5])
