"""A model of the platform's reference Ascend launcher, for bench_job only.

It does what the platform's own launcher does, as docs/contract.md §4 lists
it (a model of its behaviour, not of its code), so that bench_job can time
trainit against it: read the rank table once a second until its "status" is
"completed"; start one process per device of this host with the rank
environment, each in a session of its own, its output piped through a `tee`
into the rank's log file; poll the processes once a second; at the first
non-zero exit, or on SIGTERM, stop them: SIGTERM to every process group,
newest first, look again after 1, 2, 4 and 8 s, and SIGKILL the groups
still alive. Exit code: the failing rank's, 256-N for a rank killed by
signal N (the platform launcher's sys.exit(-N)), and 0 after a SIGTERM.

Usage: RANK_TABLE_FILE=DIR MA_MOUNT_PATH=... MA_VJ_NAME=... \
       python3 ref_launcher.py COMMAND [ARG...]
Template-1 tables only (what the bench writes).
"""
import datetime
import json
import os
import signal
import subprocess
import sys
import time


def log(level, message):
    now = datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    print(f"[run ascend] {now} - {level} - {message}", flush=True)


def wait_for_table(path, period=1.0):
    log("INFO", f"wait for rank table file at {path} ready")
    while True:
        try:
            with open(path) as f:
                table = json.load(f)
            if table.get("status") == "completed":
                log("INFO", "rank table file is ready for read")
                return table
        except (OSError, ValueError):
            pass
        time.sleep(period)


def local_devices(table):
    servers = table["server_list"]
    if len(servers) == 1:
        return servers[0]["device"]
    ip = os.environ.get("MA_CURRENT_HOST_IP", "")
    for server in servers:
        if server["server_id"] == ip:
            return server["device"]
    raise SystemExit(f"no server {ip} in the rank table")


def log_dir():
    mount = os.environ.get("MA_MOUNT_PATH", "")
    if mount and os.path.exists(os.path.join(mount, "log")):
        return os.path.join(mount, "log")
    return "/tmp/log"


class Rank:
    def __init__(self, index, device, rank_size, command, job_id):
        self.index = index
        self.rank_id = str(device["rank_id"])
        env = os.environ.copy()
        env["JOB_ID"] = job_id
        env["ASCEND_DEVICE_ID"] = str(index)
        env["DEVICE_ID"] = str(index)
        env["RANK_ID"] = self.rank_id
        env["RANK_SIZE"] = str(rank_size)
        env.setdefault("HCCL_CONNECT_TIMEOUT", "1800")
        logs = log_dir()
        process_log = os.path.join(logs, job_id, "ascend", "process_log", "rank_" + self.rank_id)
        env.setdefault("ASCEND_PROCESS_LOG_PATH", process_log)
        os.makedirs(env["ASCEND_PROCESS_LOG_PATH"], exist_ok=True)
        os.makedirs(logs, exist_ok=True)
        mount = os.environ.get("MA_MOUNT_PATH", "")
        workspace = os.path.join(mount, "workspace") if mount else "/cache"
        cwd = os.path.join(workspace, f"device{index}")
        os.makedirs(cwd, exist_ok=True)
        self.name = f"proc-rank-{self.rank_id}-device-{index}"
        log_file = os.path.join(logs, f"{job_id}-{self.name}.txt")
        # preexec_fn, as the reference uses: a session of its own (and, as a
        # side effect the reference pays too, a fork instead of a vfork).
        self.proc = subprocess.Popen(command, env=env, cwd=cwd, preexec_fn=os.setsid,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        self.tee = subprocess.Popen(["tee", log_file], stdin=self.proc.stdout)
        log("INFO", f"{self.name} (pid: {self.proc.pid})")


class Launcher:
    def __init__(self):
        self.ranks = []
        self.got_sigterm = False

    def on_sigterm(self, signum, frame):
        log("INFO", f"received terminate signal {signum}, try to destroy all processes")
        self.got_sigterm = True

    def monitor(self, period=1.0):
        while True:
            zeros = 0
            for rank in self.ranks:
                code = rank.proc.poll()
                if code is not None:
                    if code != 0:
                        log("ERROR", f"{rank.name} (pid: {rank.proc.pid}) has exited with non-zero code: {code}")
                        return code
                    zeros += 1
            if zeros == len(self.ranks) or self.got_sigterm:
                return 0
            time.sleep(period)

    def destroy(self, base_period=1.0, tries=4):
        log("INFO", "begin destroy training processes")
        alive = list(self.ranks)
        for rank in reversed(alive):
            try:
                os.killpg(rank.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        period = base_period
        for _ in range(tries):
            alive = [r for r in alive if r.proc.poll() is None]
            if not alive:
                break
            time.sleep(period)
            period *= 2
        for rank in reversed(alive):
            if rank.proc.poll() is None:
                log("WARNING", f"{rank.name} (pid: {rank.proc.pid}) did not exit in time, send kill signal")
                try:
                    os.killpg(rank.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        log("INFO", "end destroy training processes")


def main():
    command = sys.argv[1:]
    if not command:
        raise SystemExit("usage: ref_launcher.py COMMAND [ARG...]")
    table_path = os.environ.get("RANK_TABLE_FILE", "/user/config")
    if os.path.isdir(table_path):
        table_path = os.path.join(table_path, "jobstart_hccl.json")
    job_id = os.environ["MA_VJ_NAME"].replace("ma-job", "modelarts-job", 1)
    table = wait_for_table(table_path)
    devices = local_devices(table)
    rank_size = sum(len(s["device"]) for s in table["server_list"])
    launcher = Launcher()
    signal.signal(signal.SIGTERM, launcher.on_sigterm)
    for index, device in enumerate(devices):
        launcher.ranks.append(Rank(index, device, rank_size, command, job_id))
    code = launcher.monitor()
    launcher.destroy()
    sys.exit(code)


if __name__ == "__main__":
    main()
