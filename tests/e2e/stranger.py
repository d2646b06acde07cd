#!/usr/bin/env python3
"""A stranger on host 0's control port (run inside a job host's namespace,
so that its address is one of the job's): each attempt must be closed by
host 0 without affecting the job. Prints one line per attempt; exits 1 if
host 0 kept a bad connection open."""
import os
import socket
import struct
import sys

host, port = sys.argv[1], int(sys.argv[2])
MAGIC = 0x54524954


def header(version, kind, length):
    return struct.pack(">IHHI", MAGIC, version, kind, length)


def closed_by_server(payload, read_challenge=False):
    conn = socket.create_connection((host, port), timeout=10)
    conn.settimeout(10)
    if read_challenge:
        head = conn.recv(12)
        (length,) = struct.unpack(">I", head[8:12])
        nonce = conn.recv(length) if length else b""
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
    body = struct.pack(">IIB", 1, 2, 1) + os.urandom(32) + os.urandom(32) + b"ma-job-e2e"
    return header(1, 2, len(body)) + body


attempts = {
    "garbage": lambda: closed_by_server(b"GET / HTTP/1.0\r\n\r\n" * 4),
    "oversized length": lambda: closed_by_server(header(1, 2, 1 << 30)),
    "wrong version": lambda: closed_by_server(header(9, 2, 0)),
    "wrong secret": lambda: closed_by_server(wrong_secret, read_challenge=True),
}
ok = True
for name, attempt in attempts.items():
    closed = attempt()
    print(f"stranger: {name}: {'closed by host 0' if closed else 'STILL OPEN'}", flush=True)
    ok = ok and closed
sys.exit(0 if ok else 1)
