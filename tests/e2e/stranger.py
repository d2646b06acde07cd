#!/usr/bin/env python3
"""A stranger on host 0's control port, speaking the wire format with its own
encoder (src/net/PROTOCOL.md), run inside a namespace of the simulated
cluster: a job host's (so that its address is one of the job's) or one of its
own. What it does is its mode:

  stranger.py HOST PORT [bad]
      garbage, an oversized length, an old version and a wrong secret, one
      connection each: each must be closed by host 0. Prints one line per
      attempt; exits 1 if host 0 kept a bad connection open.
  stranger.py HOST PORT silent COUNT SECONDS READY_FILE
      holds COUNT connections that never say HELLO for SECONDS, opening a
      new one (at most 200 a second) whenever host 0 closes one; writes
      READY_FILE once COUNT are open. Prints what it opened.
  stranger.py HOST PORT flood SECONDS
      connects and closes as fast as it can for SECONDS. Prints how many
      connections it made.
  stranger.py HOST PORT bad-stop JOB_ID HOST_COUNT [INDEX]
      joins as host INDEX (default 1; no secret), then sends a STOP with exit
      code 256 and a cause holding a newline and an escape sequence: host 0
      must close the connection and take none of it. Exits 1 if it did not
      close.
"""
import os
import selectors
import socket
import struct
import sys
import time

host, port = sys.argv[1], int(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "bad"
MAGIC = 0x54524954
VERSION = 3
CHALLENGE, HELLO, WELCOME, REFUSE, STOP = 1, 2, 3, 4, 7


def header(kind, length, version=VERSION):
    return struct.pack(">IHHI", MAGIC, version, kind, length)


def frame(kind, payload=b""):
    return header(kind, len(payload)) + payload


def read_frame(conn):
    head = b""
    while len(head) < 12:
        chunk = conn.recv(12 - len(head))
        if not chunk:
            return None, None
        head += chunk
    (_, _, kind, length) = struct.unpack(">IHHI", head)
    payload = b""
    while len(payload) < length:
        chunk = conn.recv(length - len(payload))
        if not chunk:
            return None, None
        payload += chunk
    return kind, payload


def closed_by_server(payload, read_challenge=False):
    conn = socket.create_connection((host, port), timeout=10)
    conn.settimeout(10)
    if read_challenge:
        _, nonce = read_frame(conn)
        payload = payload(nonce)
    try:
        conn.sendall(payload)
        while True:  # what host 0 sends (a REFUSE at most), up to its close
            if not conn.recv(4096):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    finally:
        conn.close()


def wrong_secret(nonce):
    body = struct.pack(">IIQB", 1, 2, 7, 1) + os.urandom(32) + os.urandom(32) + b"ma-job-e2e"
    return frame(HELLO, body)


def bad():
    attempts = {
        "garbage": lambda: closed_by_server(b"GET / HTTP/1.0\r\n\r\n" * 4),
        "oversized length": lambda: closed_by_server(header(HELLO, 1 << 30)),
        "old version": lambda: closed_by_server(header(HELLO, 0, version=2)),
        "wrong secret": lambda: closed_by_server(wrong_secret, read_challenge=True),
    }
    ok = True
    for name, attempt in attempts.items():
        closed = attempt()
        print(f"stranger: {name}: {'closed by host 0' if closed else 'STILL OPEN'}", flush=True)
        ok = ok and closed
    return 0 if ok else 1


def connect_when_listening(deadline):
    while True:
        try:
            return socket.create_connection((host, port), timeout=2)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def silent(count, seconds, ready_file):
    sel = selectors.DefaultSelector()
    opened = closed = 0
    start = time.monotonic()
    connect_when_listening(start + 60).close()
    opened += 1

    def open_one():
        nonlocal opened
        try:
            conn = socket.create_connection((host, port), timeout=2)
        except OSError:
            return False  # host 0 is gone: the job ended
        conn.setblocking(False)
        sel.register(conn, selectors.EVENT_READ)
        opened += 1
        return True

    for _ in range(count):
        open_one()
    open(ready_file, "w").write(str(time.time()))
    end = time.monotonic() + seconds
    budget, second = 200, int(time.monotonic())
    gone = False
    while time.monotonic() < end and not gone:
        for key, _ in sel.select(timeout=0.05):
            try:
                data = key.fileobj.recv(4096)  # a CHALLENGE, or host 0's close
            except OSError:
                data = b""
            if not data:
                sel.unregister(key.fileobj)
                key.fileobj.close()
                closed += 1
        if int(time.monotonic()) != second:
            budget, second = 200, int(time.monotonic())
        while len(sel.get_map()) < count and budget > 0 and not gone:
            gone = not open_one()
            budget -= 1
    print(f"stranger: silent: opened {opened} connections, host 0 closed {closed}", flush=True)
    return 0


def flood(seconds):
    made = 0
    end = time.monotonic() + seconds
    connect_when_listening(end).close()
    while time.monotonic() < end:
        try:
            socket.create_connection((host, port), timeout=2).close()
            made += 1
        except OSError:
            pass
    print(f"stranger: flood: {made} connections", flush=True)
    return 0


def bad_stop(job_id, host_count, index):
    conn = socket.create_connection((host, port), timeout=10)
    conn.settimeout(10)
    kind, _ = read_frame(conn)
    assert kind == CHALLENGE, kind
    conn.sendall(frame(HELLO, struct.pack(">IIQB", index, host_count, 7, 0) + job_id.encode()))
    kind, _ = read_frame(conn)
    if kind != WELCOME:
        print(f"stranger: bad-stop: no WELCOME (frame type {kind})", flush=True)
        return 1
    cause = b"boom\nforged: the job stops\x1b[31m red"
    conn.sendall(frame(STOP, struct.pack(">iii", 256, index, -1) + cause))
    try:
        while True:
            kind, _ = read_frame(conn)
            if kind is None:
                print("stranger: bad-stop: closed by host 0", flush=True)
                return 0
            if kind == STOP:
                print("stranger: bad-stop: host 0 took the STOP", flush=True)
                return 1
    except (ConnectionResetError, BrokenPipeError):
        print("stranger: bad-stop: closed by host 0", flush=True)
        return 0
    except socket.timeout:
        print("stranger: bad-stop: STILL OPEN", flush=True)
        return 1


if mode == "bad":
    sys.exit(bad())
elif mode == "silent":
    sys.exit(silent(int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]))
elif mode == "flood":
    sys.exit(flood(float(sys.argv[4])))
elif mode == "bad-stop":
    sys.exit(bad_stop(sys.argv[4], int(sys.argv[5]), int(sys.argv[6]) if len(sys.argv) > 6 else 1))
sys.exit(f"stranger: unknown mode {mode}")
