#!/usr/bin/env python3
"""Time to first SSE event over one keep-alive HTTP/1.1 connection (stdlib only).

Sends N sequential streaming POST requests on one raw socket and, for each,
measures the time from the moment the request is handed to the socket to the moment
the first byte of the body's first SSE event (a line starting with ``data:``
or ``event:``) arrives. Prints one JSON object:

    {"n": N, "p50_ms": ..., "p99_ms": ..., "mean_ms": ..., "min_ms": ..., "errors": E}

Usage: ttfb.py --port 18080 [--host 127.0.0.1] [--path /v1/chat/completions]
               [--n 300] [--warmup 20] [--body JSON] [--header 'Name: value' ...]
               [--samples FILE]

--path may carry a query string (Gemini: '/v1beta/models/M:streamGenerateContent?alt=sse');
--header adds a request header (repeatable), e.g. 'anthropic-version: 2023-06-01'.
--samples writes every measured TTFB (ms), one a line, to FILE (to pool runs).
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--path", default="/v1/chat/completions")
    ap.add_argument("--n", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--body", default=DEFAULT_BODY)
    ap.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                    help="extra request header (repeatable)")
    ap.add_argument("--samples", metavar="FILE", help="write every measured TTFB (ms) here, one a line")
    a = ap.parse_args()
    extra = "".join(f"{h.strip()}\r\n" for h in a.header)

    body = a.body.encode()
    req = (
        f"POST {a.path} HTTP/1.1\r\n"
        f"Host: {a.host}:{a.port}\r\n"
        "Content-Type: application/json\r\n"
        "Accept: text/event-stream\r\n"
        f"{extra}"
        f"Content-Length: {len(body)}\r\n"
        "\r\n"
    ).encode() + body

    c = Conn(a.host, a.port)
    c.connect()
    samples, errors = [], 0
    for i in range(a.warmup + a.n):
        try:
            dt = one_request(c, req)
        except Exception as e:  # noqa: BLE001 - count and reconnect
            errors += 1
            if errors == 1:
                print(f"ttfb.py: {e}", file=sys.stderr)
            if errors > max(10, a.n // 10):
                break
            c.connect()
            continue
        if i >= a.warmup:
            samples.append(dt * 1000.0)
    if a.samples:
        with open(a.samples, "w") as f:
            f.write("".join(f"{x:.4f}\n" for x in samples))
    if not samples:
        print(json.dumps({"n": 0, "errors": errors}))
        return 1
    s = sorted(samples)
    p = lambda q: s[min(len(s) - 1, int(round(q * (len(s) - 1))))]  # noqa: E731
    print(json.dumps({
        "n": len(s),
        "p50_ms": round(statistics.median(s), 4),
        "p99_ms": round(p(0.99), 4),
        "mean_ms": round(statistics.fmean(s), 4),
        "min_ms": round(s[0], 4),
        "errors": errors,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
