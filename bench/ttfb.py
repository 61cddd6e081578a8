#!/usr/bin/env python3
"""Time to first SSE event over one keep-alive HTTP/1.1 connection (stdlib only).

Sends N sequential streaming POST requests on one raw socket and, for each,
measures the time from the moment the request is handed to the socket to the moment
the first byte of the body's first SSE event (a line starting with ``data:``
or ``event:``) arrives. Prints one JSON object:

    {"n": N, "p50_ms": ..., "p99_ms": ..., "mean_ms": ..., "min_ms": ..., "errors": E}

Usage: ttfb.py --port 18080 [--host 127.0.0.1] [--path /v1/chat/completions]
               [--n 300] [--warmup 20] [--body JSON] [--header 'Name: value' ...]
               [--samples FILE] [--port P2 ... --block 10]

--path may carry a query string (Gemini: '/v1beta/models/M:streamGenerateContent?alt=sse');
--header adds a request header (repeatable), e.g. 'anthropic-version: 2023-06-01'.
--samples writes every measured TTFB (ms), one a line, to FILE (to pool runs).
With several --port, each port has its connection and N requests, the ports take turns
--block requests at a time (the order reversed every turn), one JSON line per port
(with "port") is printed, and --samples is given once per port.
"""
import argparse
import json
import socket
import statistics
import sys
import time

DEFAULT_BODY = json.dumps({
    "model": "chat",
    "messages": [{"role": "user", "content": "Hello"}],
    "stream": True,
    "mock": {"chunks": 20},
}, separators=(",", ":"))


class Conn:
    def __init__(self, host, port):
        self.host, self.port = host, port
        self.sock = None
        self.buf = b""

    def connect(self):
        if self.sock:
            self.sock.close()
        self.sock = socket.create_connection((self.host, self.port), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise ConnectionError("connection closed by peer")
        self.buf += data
        return time.perf_counter()

    def read_until(self, sep):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out, self.buf = self.buf[:i], self.buf[i + len(sep):]
                return out
            self.fill()

    def read_exact(self, n):
        while len(self.buf) < n:
            self.fill()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out


def first_event_seen(raw):
    """True once the raw bytes received hold the headers plus an SSE event start.

    Chunk-size lines are hex digits, so scanning the raw (still chunk-framed)
    body for a line starting with ``data:`` / ``event:`` is exact enough.
    """
    i = raw.find(b"\r\n\r\n")
    if i < 0:
        return False
    body = raw[i + 4:]
    return body.startswith((b"data:", b"event:")) or b"\ndata:" in body or b"\nevent:" in body


def one_request(c, req):
    """Send one request; return seconds to the first SSE event byte."""
    # t0 before the write: taken after it, a preemption between sendall() and
    # the clock read could let the answer arrive "before" t0.
    t0 = time.perf_counter()
    c.sock.sendall(req)
    # Phase 1: receive until the first event has arrived; time that recv.
    while not first_event_seen(c.buf):
        t_first = c.fill()
        if b"\r\n\r\n" in c.buf and not c.buf.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")):
            raise RuntimeError(f"non-200 response: {c.buf[:300]!r}")
        if len(c.buf) > 1 << 20:
            raise RuntimeError("no SSE event in the first MiB")
    if not c.buf:
        raise RuntimeError("no data")
    # Phase 2: parse the whole response (all bytes stay in c.buf) to its end.
    head = c.read_until(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    hdrs = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdrs[k.strip().lower()] = v.strip().lower()
    if hdrs.get(b"transfer-encoding") == b"chunked":
        body = b""
        while True:
            size = int(c.read_until(b"\r\n").split(b";")[0], 16)
            if size == 0:
                while c.read_until(b"\r\n"):  # trailers, then an empty line
                    pass
                break
            body += c.read_exact(size)
            c.read_exact(2)
    elif b"content-length" in hdrs:
        body = c.read_exact(int(hdrs[b"content-length"]))
    else:
        raise RuntimeError("response has neither chunked encoding nor content-length")
    if status != 200:
        raise RuntimeError(f"status {status}: {body[:200]!r}")
    if hdrs.get(b"connection") == b"close":
        c.connect()
    return t_first - t0


class Target:
    """One port: its connection, request, samples and errors."""

    def __init__(self, host, port, path, extra, body):
        self.port = port
        self.req = (
            f"POST {path} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            "Content-Type: application/json\r\n"
            "Accept: text/event-stream\r\n"
            f"{extra}"
            f"Content-Length: {len(body)}\r\n"
            "\r\n"
        ).encode() + body
        self.conn = Conn(host, port)
        self.conn.connect()
        self.done = 0  # requests answered, warm-up included
        self.samples, self.errors = [], 0

    def one(self, warmup, max_errors):
        """One request; False once this target has failed too often."""
        try:
            dt = one_request(self.conn, self.req)
        except Exception as e:  # noqa: BLE001 - count and reconnect
            self.errors += 1
            if self.errors == 1:
                print(f"ttfb.py: port {self.port}: {e}", file=sys.stderr)
            if self.errors > max_errors:
                return False
            self.conn.connect()
            return True
        if self.done >= warmup:
            self.samples.append(dt * 1000.0)
        self.done += 1
        return True

    def result(self):
        if not self.samples:
            return {"n": 0, "errors": self.errors}
        s = sorted(self.samples)
        p = lambda q: s[min(len(s) - 1, int(round(q * (len(s) - 1))))]  # noqa: E731
        return {
            "n": len(s),
            "p50_ms": round(statistics.median(s), 4),
            "p99_ms": round(p(0.99), 4),
            "mean_ms": round(statistics.fmean(s), 4),
            "min_ms": round(s[0], 4),
            "errors": self.errors,
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, action="append", required=True,
                    help="repeatable: the ports take turns, --block requests each")
    ap.add_argument("--path", default="/v1/chat/completions")
    ap.add_argument("--n", type=int, default=300, help="measured requests per port")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--block", type=int, default=10, help="requests per turn with several ports")
    ap.add_argument("--body", default=DEFAULT_BODY)
    ap.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                    help="extra request header (repeatable)")
    ap.add_argument("--samples", action="append", default=[], metavar="FILE",
                    help="write every measured TTFB (ms) of the n-th --port to the n-th FILE, one a line")
    a = ap.parse_args()
    if a.samples and len(a.samples) != len(a.port):
        ap.error("give one --samples FILE per --port")
    extra = "".join(f"{h.strip()}\r\n" for h in a.header)
    targets = [Target(a.host, port, a.path, extra, a.body.encode()) for port in a.port]
    max_errors = max(10, a.n // 10)
    block = a.block if len(targets) > 1 else a.warmup + a.n
    # Several ports: turns of `block` requests each, the order reversed every turn, so
    # that the machine's noise lands on all of them alike.
    live = list(targets)
    turn = 0
    while live:
        for t in list(live if turn % 2 == 0 else reversed(live)):
            for _ in range(block):
                if t.done >= a.warmup + a.n or not t.one(a.warmup, max_errors):
                    live.remove(t)
                    break
        turn += 1
    for t, path in zip(targets, a.samples):
        with open(path, "w") as f:
            f.write("".join(f"{x:.4f}\n" for x in t.samples))
    for t in targets:
        r = t.result()
        if len(targets) > 1:
            r = {"port": t.port, **r}
        print(json.dumps(r))
    return 0 if all(t.samples for t in targets) else 1


if __name__ == "__main__":
    sys.exit(main())
