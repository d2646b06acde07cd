#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora and dictionaries (tests/fuzz/).

    tests/fuzz/make_seeds.py            # from the repository root, or anywhere

The seeds are the tests' own inputs, in each target's input form (the
comment at the top of each target says it):

  corpus/rank_table/   every rank table of the golden cases (tests/golden/cases)
  corpus/environment/  each golden case's environment and files
  corpus/cli/          each golden case's `trainit plan` arguments and variables
  corpus/control/      the control channel's messages as the unit tests send
                       them (net_control*_test.cpp), to either side
  corpus/notify/       sd_notify datagrams as the notify tests send them

(corpus/device_check/ and corpus/status_file/ are written by hand: a check
that passes, one that fails, one out of order; a status file of a running
job and of one that ended. This script leaves them alone.)

and the dictionaries are the words of the sources the targets read: the
rank table's keys, every variable a planner reads, every option and its
variable, the wire format's magic and types, sd_notify's keys.

It replaces corpus/<target>/ as a whole: rerun it when the golden cases
change, and review `git status`. (The corpora libFuzzer grows are not kept
here: tests/fuzz/run.sh writes them to the build tree.)
"""
import hashlib
import pathlib
import re
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
FUZZ = ROOT / "tests" / "fuzz"
CASES = ROOT / "tests" / "golden" / "cases"
CASE_DIR = "/case"  # what @CASE@ becomes


def escape(text):
    """One item of the readable form: a backslash and a newline escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def lines_of(path):
    if not path.exists():
        return []
    return [l for l in path.read_text().splitlines() if l and not l.startswith("#")]


def case_files(case):
    """The files a case reads (its rank tables, host files), by path."""
    for path in sorted(case.rglob("*")):
        rel = path.relative_to(case)
        if path.is_file() and rel.parts[0] not in ("env", "args") and not rel.name.startswith("expected."):
            yield rel, path.read_text()


class Corpus:
    def __init__(self, target):
        self.dir = FUZZ / "corpus" / target
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        self.seen = set()

    def add(self, name, data):
        if isinstance(data, str):
            data = data.encode()
        digest = hashlib.sha1(data).hexdigest()
        if digest in self.seen:
            return
        self.seen.add(digest)
        (self.dir / name).write_bytes(data)


def write_dict(target, words):
    out = [f"# {target}: words for libFuzzer (-dict), written by make_seeds.py"]
    for word in sorted(set(words)):
        body = "".join(c if 0x20 <= ord(c) < 0x7F and c not in '"\\' else "\\x%02x" % ord(c) for c in word)
        out.append(f'"{body}"')
    (FUZZ / f"{target}.dict").write_text("\n".join(out) + "\n")


def rank_tables():
    corpus = Corpus("rank_table")
    for case in sorted(CASES.iterdir()):
        for rel, text in case_files(case):
            if rel.suffix == ".json":
                corpus.add(f"{case.name}.json", text)
    keys = ["status", "completed", "initializing", "version", "1.0", "1.2", "2.0", "server_count", "server_list",
            "server_id", "device", "device_id", "device_ip", "rank_id", "host_ip", "super_pod_list", "group_count",
            "group_list", "group_name", "device_count", "instance_count", "instance_list", "pod_name", "devices",
            "rank_list"]
    write_dict("rank_table", [f'"{k}"' for k in keys] + ["\\u0000", "\\ud800", "-1", "1e999", "00"])


def environments():
    corpus = Corpus("environment")
    for case in sorted(CASES.iterdir()):
        items = [l.replace("@CASE@", CASE_DIR) for l in lines_of(case / "env")]
        items += [f"{CASE_DIR}/{rel}={text}" for rel, text in case_files(case)]
        corpus.add(case.name, "".join(escape(i) + "\n" for i in items))
    names = set()
    for source in list((ROOT / "src" / "platform").glob("*.cpp")) + list((ROOT / "src" / "plan").glob("*.cpp")):
        names.update(re.findall(r'"((?:MA|VC|VK|PET|TF|MS|MY|RANK|MASTER|WORLD|HOST|HOME|NCCL|JOB)[A-Z0-9_]*)"',
                                source.read_text()))
    names.update(["HOSTNAME", "HOME", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "VC_MASTER_HOSTS",
                  "VC_WORKER_HOSTS"])
    names = {n for n in names if not n.endswith("_")}  # prefixes the sources build names from
    write_dict("environment", [f"{n}=" for n in names] + ["/etc/volcano/master.host=", "/etc/volcano/worker.host=",
                                                          "/dev/davinci0", "/dev/nvidia0", "torchrun", "msrun",
                                                          "auto", ":", ",", "\\n"])


def command_lines():
    corpus = Corpus("cli")
    for case in sorted(CASES.iterdir()):
        items = ["plan"] + [l.replace("@CASE@", CASE_DIR) for l in lines_of(case / "args")]
        items += ["$" + l.replace("@CASE@", CASE_DIR) for l in lines_of(case / "env")]
        corpus.add(case.name, "".join(escape(i) + "\n" for i in items))
    cli = (ROOT / "init" / "exec" / "options.cpp").read_text()
    words = []
    for name in re.findall(r'\.name = "([a-z][a-z-]*)"', cli):
        words += [f"--{name}", f"--{name}=", "$TRAINIT_" + name.upper().replace("-", "_") + "="]
    words += [f"-{c}" for c in re.findall(r"\.short_name = '(.)'", cli)]
    words += [f"${v}=" for v in re.findall(r'\.tini_variable = "(TINI_[A-Z_]+)"', cli)]
    words += ["--", "plan", "SIGKILL", "SIGTERM", "on-failure", "notify", "spawn", "off", "1G", "0.5"]
    write_dict("cli", words)


# The wire format (src/net/PROTOCOL.md).
MAGIC, VERSION = 0x54524954, 3
CHALLENGE, HELLO, WELCOME, REFUSE, CHECKIN, GO, STOP, RELEASE, HEARTBEAT, FINISHED, RESTART = range(1, 12)
JOB_ID = b"ma-job-fuzz"  # what tests/fuzz/control.cpp's hosts run


def frame(kind, payload=b"", version=VERSION, magic=MAGIC):
    return struct.pack(">IHHI", magic, version, kind, len(payload)) + payload


def stop(code=3, host=1, rank=5, cause=b"rank 5 exited 3"):
    return struct.pack(">iii", code, host, rank) + cause


def control():
    corpus = Corpus("control")
    # Flags (tests/fuzz/control.cpp): 1 attack a client, 2 secret, 4 the peer signs, 8 host 0 checked in.
    instance = 0x1234567890ABCDEF  # the peer's trainit
    plain_hello = frame(HELLO, struct.pack(">IIQB", 1, 2, instance, 0) + JOB_ID)
    signed_hello = frame(HELLO, struct.pack(">IIQB", 1, 2, instance, 1) + bytes(32) + bytes(range(32)) + JOB_ID)
    gen = struct.pack(">I", 1)
    client_says = [frame(CHECKIN), frame(FINISHED), frame(HEARTBEAT), frame(STOP, stop()),
                   frame(RESTART, gen + stop()), frame(CHECKIN, gen), frame(FINISHED, gen)]
    for flags, hello in ((0, plain_hello), (8, plain_hello), (2 | 4, signed_hello), (2 | 4 | 8, signed_hello)):
        corpus.add(f"server-{flags}-hello", bytes([flags]) + hello)
        for i, message in enumerate(client_says):
            corpus.add(f"server-{flags}-hello-then-{i}", bytes([flags]) + hello + message)
        corpus.add(f"server-{flags}-all", bytes([flags]) + hello + b"".join(client_says))
    corpus.add("server-2-unsigned", bytes([2]) + signed_hello)
    corpus.add("server-0-wrong-job", bytes([0]) + frame(HELLO, struct.pack(">IIQB", 1, 2, instance, 0) + b"other-job"))
    corpus.add("server-0-host-0", bytes([0]) + frame(HELLO, struct.pack(">IIQB", 0, 2, instance, 0) + JOB_ID))
    corpus.add("server-0-short-instance", bytes([0]) + frame(HELLO, struct.pack(">IIIB", 1, 2, 7, 0) + JOB_ID))
    corpus.add("server-0-checkin-first", bytes([0]) + frame(CHECKIN))
    corpus.add("server-0-version-2", bytes([0]) + frame(HELLO, struct.pack(">IIB", 1, 2, 0) + JOB_ID, version=2))
    corpus.add("server-0-bad-magic", bytes([0]) + frame(HELLO, b"", magic=0x48545450))
    corpus.add("server-0-too-long", bytes([0]) + struct.pack(">IHHI", MAGIC, VERSION, HELLO, 5000))
    corpus.add("server-0-control-byte", bytes([0]) + plain_hello + frame(STOP, stop(cause=b"line\nbreak")))

    nonce = bytes(range(100, 132)) + struct.pack(">Q", 0xFEDCBA0987654321)  # and host 0's instance
    server_says = [frame(GO), frame(GO, gen), frame(HEARTBEAT), frame(STOP, stop(host=0)),
                   frame(RESTART, gen + stop(host=0)), frame(RELEASE, struct.pack(">i", 0)),
                   frame(RELEASE, struct.pack(">i", 3))]
    for flags, welcome in ((1, frame(WELCOME)), (1 | 2 | 4, frame(WELCOME, bytes(32)))):
        start = frame(CHALLENGE, nonce) + welcome
        corpus.add(f"client-{flags}-welcome", bytes([flags]) + start)
        for i, message in enumerate(server_says):
            corpus.add(f"client-{flags}-welcome-then-{i}", bytes([flags]) + start + message)
        corpus.add(f"client-{flags}-all", bytes([flags]) + start + b"".join(server_says))
    corpus.add("client-1-refuse", bytes([1]) + frame(CHALLENGE, nonce) + frame(REFUSE, b"host 1 is of job 'x'"))
    corpus.add("client-1-short-nonce", bytes([1]) + frame(CHALLENGE, nonce[:8]))
    corpus.add("client-3-unsigned", bytes([3]) + frame(CHALLENGE, nonce) + frame(WELCOME, bytes(32)))
    words = [struct.pack(">I", MAGIC).decode("latin-1"), struct.pack(">IH", MAGIC, VERSION).decode("latin-1")]
    words += [struct.pack(">H", t).decode("latin-1") for t in range(1, 12)]
    words += [struct.pack(">I", n).decode("latin-1") for n in (0, 1, 2, 255, 256, 4096, 65536, 0xFFFFFFFF)]
    words += [JOB_ID.decode()]
    write_dict("control", words)


def notify():
    corpus = Corpus("notify")
    # Flags (tests/fuzz/notify.cpp): 1 descriptors come along, 2 from another pid; datagrams split at 0x1e.
    datagrams = ["READY=1", "STATUS=Loading the model", "READY=1\nSTATUS=Serving", "MAINPID=42\nREADY=1\n",
                 "STATUS=\nREADY=0", "=no key\nno equals\nX=", "WATCHDOG=1", "STOPPING=1\nSTATUS=bye",
                 "STATUS=a\x1eSTATUS=b\x1eREADY=1", ""]
    for i, d in enumerate(datagrams):
        for flags in (0, 1, 2):
            corpus.add(f"datagram-{i}-flags-{flags}", bytes([flags]) + d.encode())
    write_dict("notify", ["READY=1", "STATUS=", "MAINPID=", "WATCHDOG=1", "STOPPING=1", "RELOADING=1", "ERRNO=",
                          "\n", "\x1e", "="])


if __name__ == "__main__":
    rank_tables()
    environments()
    command_lines()
    control()
    notify()
    for target in sorted((FUZZ / "corpus").iterdir()):
        files = list(target.iterdir())
        print(f"{target.name}: {len(files)} seeds, {sum(f.stat().st_size for f in files)} bytes")
