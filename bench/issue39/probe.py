#!/usr/bin/env python3
"""Connection probes of issue 39 against a `dossier serve` on 127.0.0.1 (stdlib only).

  probe.py idle PORT PID N HOLD_S [SOURCES]
      opens N sockets that send nothing (spread over SOURCES loopback addresses,
      127.0.0.1 .. 127.0.0.SOURCES, default 1), keeps them HOLD_S seconds, and prints:
      how many connected, how many the server still holds open every 5 s, the latency
      of a normal GET /healthz from 127.0.0.1 and from 127.0.0.250 before, during and
      after, and the server's RSS (VmRSS of PID) at each point.
  probe.py slow PORT KEY
      a partial request head, a partial body and an idle keep-alive connection: how
      long until the server closes each, and what it answered (bounded at 330 s).
  probe.py term PORT PID KEY CLIENTS SECONDS
      CLIENTS threads POST /v1/search over keep-alive connections in a loop; after
      SECONDS the server gets SIGTERM; prints how many requests were answered, how many
      sent requests got EOF or a reset with no response, how many connections were
      refused (listener closed: no request sent) and whether any response was cut.

Every socket targets 127.0.0.1; counts and times are bounded by the arguments.
"""

import http.client
import json
import os
import signal
import socket
import sys
import threading
import time


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fds(pid):
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def health(port, source="127.0.0.1", timeout=30):
    t0 = time.monotonic()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0))
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        s.close()
        status = data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.1") else "none"
    except OSError as e:
        status = type(e).__name__
    return status, (time.monotonic() - t0) * 1000


def still_open(socks):
    """(open, refused): sockets the server still holds (no EOF, no reset, nothing
    sent), and sockets it answered 503 and closed; the rest it closed silently."""
    n = refused = 0
    for s in socks:
        try:
            s.setblocking(False)
            b = s.recv(16, socket.MSG_PEEK)
            if b.startswith(b"HTTP/1.1 503"):
                refused += 1
            elif b:
                n += 1
        except BlockingIOError:
            n += 1
        except OSError:
            pass
    return n, refused


def idle(port, pid, n, hold, sources=1):
    def report(label):
        a = health(port)
        b = health(port, "127.0.0.250")
        print(f"{label}: rss {rss_mb(pid):.0f} MB, fds {fds(pid)}, healthz from 127.0.0.1 {a[0]} in {a[1]:.1f} ms, from 127.0.0.250 {b[0]} in {b[1]:.1f} ms", flush=True)

    report("before")
    socks, failed = [], 0
    t0 = time.monotonic()
    for i in range(n):
        src = f"127.0.0.{1 + i % sources}"
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(src, 0))
            socks.append(s)
        except OSError:
            failed += 1
    print(f"opened {len(socks)} sockets ({failed} failed) in {time.monotonic() - t0:.1f} s", flush=True)
    time.sleep(1)
    report("during")
    end = time.monotonic() + hold
    while time.monotonic() < end:
        time.sleep(min(5, max(0, end - time.monotonic())))
        held, refused = still_open(socks)
        print(f"t+{hold - (end - time.monotonic()):.0f} s: {held} of {len(socks)} still open, {refused} answered 503 and closed, rss {rss_mb(pid):.0f} MB, fds {fds(pid)}", flush=True)
    for s in socks:
        s.close()
    time.sleep(3)
    report("after close")


def slow(port, key):
    def timed(label, payload, bound=330):
        s = socket.create_connection(("127.0.0.1", port))
        s.settimeout(bound)
        t0 = time.monotonic()
        s.sendall(payload)
        data = b""
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                data += b
            how = "closed"
        except socket.timeout:
            how = "STILL OPEN"
        except OSError as e:
            how = f"closed ({type(e).__name__})"
        first = data.split(b"\r\n", 1)[0].decode(errors="replace") or "(nothing)"
        print(f"{label}: {how} after {time.monotonic() - t0:.1f} s; answered: {first}", flush=True)

    threads = [
        threading.Thread(target=timed, args=("partial head", b"GET /healthz HTTP/1.1\r\nHost: x\r\n")),
        threading.Thread(target=timed, args=("partial body", (
            "POST /v1/search HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key +
            "\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"query\": \"").encode())),
        threading.Thread(target=timed, args=("idle, nothing sent", b"")),
        threading.Thread(target=timed, args=("keep-alive after a response", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def term(port, pid, key, clients, seconds):
    body = json.dumps({"query": "退货 政策"})
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    counts = {"answered": 0, "eof_no_response": 0, "refused": 0, "cut": 0, "other": 0, "answered_after_signal": 0, "eof_after_signal": 0}
    lock = threading.Lock()
    signalled = threading.Event()
    stop_at = time.monotonic() + seconds + 30

    def client():
        conn = None
        while time.monotonic() < stop_at:
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                conn.request("POST", "/v1/search", body, headers)
            except ConnectionRefusedError:
                with lock:
                    counts["refused"] += 1
                return
            except OSError:
                # The request could not be sent: the connection was closed first.
                conn = None
                continue
            try:
                r = conn.getresponse()
                data = r.read()
                length = r.getheader("content-length")
                with lock:
                    if length is not None and len(data) != int(length):
                        counts["cut"] += 1
                    else:
                        counts["answered"] += 1
                        if signalled.is_set():
                            counts["answered_after_signal"] += 1
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (http.client.RemoteDisconnected, ConnectionResetError, http.client.IncompleteRead, BrokenPipeError):
                with lock:
                    counts["eof_no_response"] += 1
                    if signalled.is_set():
                        counts["eof_after_signal"] += 1
                conn = None
                if signalled.is_set():
                    return
            except Exception:
                with lock:
                    counts["other"] += 1
                conn = None

    threads = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    before = dict(counts)
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)
    signalled.set()
    for t in threads:
        t.join(timeout=max(1, stop_at - time.monotonic()))
    while True:
        try:
            os.kill(pid, 0)
        except OSError:
            break
        if time.monotonic() - t0 > 60:
            break
        time.sleep(0.05)
    print(f"before SIGTERM: {json.dumps(before)}")
    print(f"server exited {time.monotonic() - t0:.1f} s after SIGTERM")
    print(json.dumps(counts))


if __name__ == "__main__":
    cmd = sys.argv[1]
    a = sys.argv[2:]
    if cmd == "idle":
        idle(int(a[0]), int(a[1]), int(a[2]), float(a[3]), int(a[4]) if len(a) > 4 else 1)
    elif cmd == "slow":
        slow(int(a[0]), a[1])
    elif cmd == "term":
        term(int(a[0]), int(a[1]), a[2], int(a[3]), float(a[4]))
    else:
        sys.exit(__doc__)
