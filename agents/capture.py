#!/usr/bin/env python3
"""Capture server for agent CLIs (Claude Code, Codex): Python 3 stdlib only.

Listens on 127.0.0.1:<port>, appends every request (method, path, query,
headers, body) as one JSON line to --log, and answers with a canned, valid
provider response:

  POST /v1/messages               Anthropic Messages: SSE when the body has
                                  "stream": true, else JSON.
  POST /v1/messages/count_tokens  {"input_tokens": N}
  POST /v1/responses              OpenAI Responses API SSE stream.
  anything else                   404 JSON (Anthropic-style error body).

--mode text  every answer is plain text ("Hi from switchyard-capture.").
--mode tool  the tool loop: a request whose conversation does not yet carry a
             tool result, and that declares the shell tool (Claude Code:
             "Bash"; Codex: shell_command / shell / exec_command), is answered
             with a call of that tool running `echo switchyard-tool-ok`; a
             request that carries the tool result is answered with the text
             "FINAL: <tool output>". Side requests (no shell tool declared,
             e.g. Claude Code's title / topic generation) get plain text.

--port 0 picks a free port; the chosen port is printed as "PORT <n>" on
stdout and, with --port-file, written to that file.

Usage: python3 agents/capture.py --port 0 --port-file /tmp/p --log /tmp/req.jsonl --mode tool
"""

import argparse
import base64
import gzip
import json
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

TOOL_COMMAND = "echo switchyard-tool-ok"
PLAIN_TEXT = "Hi from switchyard-capture."
OPAQUE_SIGNATURE = "c3dpdGNoeWFyZC1jYXB0dXJlLW9wYXF1ZS1zaWduYXR1cmU="  # base64, opaque to the client
OPAQUE_REASONING = "gAAAAABzd2l0Y2h5YXJkLWNhcHR1cmUtb3BhcXVlLXJlYXNvbmluZw=="

ARGS = None
LOG_LOCK = threading.Lock()
SEQ = [0]


# ---------------------------------------------------------------- helpers


def log_request(rec):
    with LOG_LOCK:
        SEQ[0] += 1
        rec["seq"] = SEQ[0]
        with open(ARGS.log, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")


def sse(event, data):
    return ("event: %s\ndata: %s\n\n" % (event, json.dumps(data, separators=(",", ":")))).encode()


def new_id(prefix):
    return prefix + uuid.uuid4().hex[:24]


def text_of_content(content):
    """Text of an Anthropic tool_result content (string or block list)."""
    if isinstance(content, str):
        return content
    out = []
    for b in content or []:
        if isinstance(b, dict) and b.get("type") == "text":
            out.append(b.get("text", ""))
    return "".join(out)


# ----------------------------------------------------- Anthropic Messages


def anthropic_find_tool_result(body):
    """The newest tool_result in the conversation, or None."""
    for msg in reversed(body.get("messages") or []):
        content = msg.get("content")
        if msg.get("role") != "user" or not isinstance(content, list):
            continue
        for block in reversed(content):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                return block
    return None


def anthropic_plan(body):
    """("text", str) or ("tool_use", name, input)."""
    if ARGS.mode == "tool":
        tr = anthropic_find_tool_result(body)
        if tr is not None:
            return ("text", "FINAL: " + text_of_content(tr.get("content")).strip())
        names = [t.get("name") for t in body.get("tools") or [] if isinstance(t, dict)]
        if "Bash" in names:
            return ("tool_use", "Bash", {"command": TOOL_COMMAND,
                                         "description": "Print a marker for the switchyard test"})
    return ("text", PLAIN_TEXT)


def anthropic_usage():
    return {"input_tokens": 25, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
            "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
            "output_tokens": 12, "service_tier": "standard"}


def anthropic_json(body):
    plan = anthropic_plan(body)
    if plan[0] == "text":
        content, stop = [{"type": "text", "text": plan[1]}], "end_turn"
    else:
        content = [{"type": "tool_use", "id": new_id("toolu_"), "name": plan[1], "input": plan[2]}]
        stop = "tool_use"
    if ARGS.thinking:
        content.insert(0, {"type": "thinking", "thinking": "", "signature": OPAQUE_SIGNATURE})
    return {"id": new_id("msg_"), "type": "message", "role": "assistant",
            "model": body.get("model", "claude-test"), "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": anthropic_usage()}


def anthropic_sse(body):
    plan = anthropic_plan(body)
    model = body.get("model", "claude-test")
    usage = anthropic_usage()
    start_usage = dict(usage, output_tokens=1)
    out = [sse("message_start", {"type": "message_start", "message": {
        "model": model, "id": new_id("msg_"), "type": "message", "role": "assistant",
        "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
    i = 0
    if ARGS.thinking:  # a thinking block as sent with display "omitted": empty text, a signature
        out.append(sse("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "thinking", "thinking": "",
                                                                 "signature": ""}}))
        out.append(sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "signature_delta",
                                                         "signature": OPAQUE_SIGNATURE}}))
        out.append(sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
        i = 1
    if plan[0] == "text":
        out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": {"type": "text", "text": ""}}))
        out.append(sse("ping", {"type": "ping"}))
        text = plan[1]
        for piece in (text[: len(text) // 2], text[len(text) // 2:]):
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "text_delta", "text": piece}}))
        stop = "end_turn"
    else:
        out.append(sse("content_block_start", {"type": "content_block_start", "index": i,
                                               "content_block": {"type": "tool_use", "id": new_id("toolu_"),
                                                                 "name": plan[1], "input": {}}}))
        out.append(sse("ping", {"type": "ping"}))
        args = json.dumps(plan[2])
        for piece in ("", args[:10], args[10:]):
            out.append(sse("content_block_delta", {"type": "content_block_delta", "index": i,
                                                   "delta": {"type": "input_json_delta", "partial_json": piece}}))
        stop = "tool_use"
    out.append(sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(sse("message_delta", {"type": "message_delta",
                                     "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"input_tokens": usage["input_tokens"],
                                               "cache_creation_input_tokens": 0,
                                               "cache_read_input_tokens": 0,
                                               "output_tokens": usage["output_tokens"]}}))
    out.append(sse("message_stop", {"type": "message_stop"}))
    return out


# -------------------------------------------------------- OpenAI Responses

SHELL_TOOL_NAMES = ("shell_command", "shell", "exec_command", "container.exec")


def responses_find_output(body):
    items = body.get("input")
    if not isinstance(items, list):
        return None
    for item in reversed(items):
        if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
            return item
    return None


def responses_shell_call(body):
    """(name, arguments-json) for the declared shell tool, or None."""
    for want in SHELL_TOOL_NAMES:
        for t in body.get("tools") or []:
            if not isinstance(t, dict) or t.get("type") != "function" or t.get("name") != want:
                continue
            props = (t.get("parameters") or {}).get("properties") or {}
            args = {}
            if "command" in props:
                if props["command"].get("type") == "array":
                    args["command"] = ["bash", "-lc", TOOL_COMMAND]
                else:
                    args["command"] = TOOL_COMMAND
            elif "cmd" in props:
                args["cmd"] = TOOL_COMMAND
            else:
                continue
            return want, json.dumps(args)
    return None


def output_text_of(item):
    out = item.get("output")
    if isinstance(out, str):
        return out
    if isinstance(out, dict):  # older shape {"content": "...", "success": bool}
        return str(out.get("content", ""))
    if isinstance(out, list):
        return "".join(p.get("text", "") for p in out if isinstance(p, dict))
    return ""


def responses_sse(body):
    model = body.get("model", "gpt-test")
    rid = new_id("resp_")
    now = int(time.time())
    plan = ("text", PLAIN_TEXT)
    if ARGS.mode == "tool":
        fo = responses_find_output(body)
        if fo is not None:
            plan = ("text", "FINAL: " + output_text_of(fo).strip())
        else:
            call = responses_shell_call(body)
            if call:
                plan = ("call",) + call

    def response(status, output, usage):
        return {"id": rid, "object": "response", "created_at": now, "status": status,
                "background": False, "error": None, "incomplete_details": None,
                "instructions": None, "max_output_tokens": None, "model": model,
                "output": output, "parallel_tool_calls": body.get("parallel_tool_calls", True),
                "previous_response_id": None, "reasoning": {"effort": None, "summary": None},
                "store": body.get("store", False), "temperature": 1.0,
                "text": {"format": {"type": "text"}, "verbosity": "medium"},
                "tool_choice": body.get("tool_choice", "auto"), "tools": [], "top_p": 1.0,
                "truncation": "disabled", "usage": usage, "user": None, "metadata": {}}

    seq = [0]

    def ev(name, data):
        data = dict({"type": name}, **data)
        data["sequence_number"] = seq[0]
        seq[0] += 1
        return sse(name, data)

    out = [ev("response.created", {"response": response("in_progress", [], None)}),
           ev("response.in_progress", {"response": response("in_progress", [], None)})]
    done = []  # finished output items, for response.completed
    if ARGS.reasoning:  # an encrypted reasoning item, as with include: ["reasoning.encrypted_content"]
        rs = {"id": new_id("rs_"), "type": "reasoning", "encrypted_content": OPAQUE_REASONING, "summary": []}
        out.append(ev("response.output_item.added", {"output_index": 0, "item": rs}))
        out.append(ev("response.output_item.done", {"output_index": 0, "item": rs}))
        done.append(rs)
    oi = len(done)
    if plan[0] == "text":
        text = plan[1]
        mid = new_id("msg_")
        out.append(ev("response.output_item.added", {"output_index": oi, "item": {
            "id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}}))
        out.append(ev("response.content_part.added", {"item_id": mid, "output_index": oi, "content_index": 0,
                                                      "part": {"type": "output_text", "annotations": [],
                                                               "logprobs": [], "text": ""}}))
        for piece in (text[: len(text) // 2], text[len(text) // 2:]):
            out.append(ev("response.output_text.delta", {"item_id": mid, "output_index": oi, "content_index": 0,
                                                         "delta": piece, "logprobs": []}))
        out.append(ev("response.output_text.done", {"item_id": mid, "output_index": oi, "content_index": 0,
                                                    "text": text, "logprobs": []}))
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        out.append(ev("response.content_part.done", {"item_id": mid, "output_index": oi, "content_index": 0,
                                                     "part": part}))
        item = {"id": mid, "type": "message", "status": "completed", "content": [part], "role": "assistant"}
        out.append(ev("response.output_item.done", {"output_index": oi, "item": item}))
    else:
        _, name, args = plan
        fid, cid = new_id("fc_"), new_id("call_")
        out.append(ev("response.output_item.added", {"output_index": oi, "item": {
            "id": fid, "type": "function_call", "status": "in_progress", "arguments": "",
            "call_id": cid, "name": name}}))
        for piece in (args[:10], args[10:]):
            out.append(ev("response.function_call_arguments.delta", {"item_id": fid, "output_index": oi,
                                                                     "delta": piece}))
        out.append(ev("response.function_call_arguments.done", {"item_id": fid, "output_index": oi,
                                                                "arguments": args}))
        item = {"id": fid, "type": "function_call", "status": "completed", "arguments": args,
                "call_id": cid, "name": name}
        out.append(ev("response.output_item.done", {"output_index": oi, "item": item}))
    usage = {"input_tokens": 25, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 12,
             "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 37}
    out.append(ev("response.completed", {"response": response("completed", done + [item], usage)}))
    return out


# ------------------------------------------------------------------ server


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "switchyard-capture/1"

    def log_message(self, fmt, *a):  # quiet; the JSONL log is the record
        if ARGS.verbose:
            sys.stderr.write("capture: " + (fmt % a) + "\n")

    def _read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = b""
        if n:
            raw = self.rfile.read(n)
        elif (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        enc = (self.headers.get("Content-Encoding") or "").lower()
        try:
            if enc == "gzip":
                raw = gzip.decompress(raw)
            elif enc == "deflate":
                raw = zlib.decompress(raw)
        except Exception:
            pass
        return raw

    def _handle(self):
        u = urlsplit(self.path)
        raw = self._read_body() if self.command not in ("GET", "HEAD") or self.headers.get("Content-Length") else b""
        body = None
        rec = {"time": time.time(), "method": self.command, "target": self.path, "path": u.path,
               "query": dict(parse_qsl(u.query, keep_blank_values=True)),
               "headers": {k.lower(): v for k, v in self.headers.items()}}
        if raw:
            try:
                body = json.loads(raw.decode("utf-8"))
                rec["body"] = body
            except Exception:
                rec["body_b64"] = base64.b64encode(raw).decode()
        else:
            rec["body"] = None
        log_request(rec)
        body = body if isinstance(body, dict) else {}

        if self.command == "POST" and u.path in ("/v1/messages", "/messages"):
            if body.get("stream"):
                return self._send_sse(anthropic_sse(body), anthropic=True)
            return self._send_json(200, anthropic_json(body), anthropic=True)
        if self.command == "POST" and u.path in ("/v1/messages/count_tokens", "/messages/count_tokens"):
            return self._send_json(200, {"input_tokens": 25}, anthropic=True)
        if self.command == "POST" and u.path in ("/v1/responses", "/responses"):
            return self._send_sse(responses_sse(body))
        return self._send_json(404, {"type": "error", "error": {
            "type": "not_found_error", "message": "capture server: no route for %s %s" % (self.command, u.path)}})

    def _common_headers(self, anthropic):
        self.send_header("request-id" if anthropic else "x-request-id", new_id("req_"))

    def _send_json(self, status, obj, anthropic=False):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self._common_headers(anthropic)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_sse(self, events, anthropic=False):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self._common_headers(anthropic)
        self.end_headers()
        for chunk in events:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = do_CONNECT = _handle


def main():
    global ARGS, TOOL_COMMAND
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--log", required=True)
    p.add_argument("--mode", choices=("text", "tool"), default="text")
    p.add_argument("--thinking", action="store_true",
                   help="Anthropic answers start with a thinking block (empty text, opaque signature)")
    p.add_argument("--reasoning", action="store_true",
                   help="Responses answers start with a reasoning item carrying encrypted_content")
    p.add_argument("--command", default=TOOL_COMMAND,
                   help="shell command the tool call asks for (default: %(default)s)")
    p.add_argument("--verbose", action="store_true")
    ARGS = p.parse_args()
    TOOL_COMMAND = ARGS.command
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    port = srv.server_address[1]
    if ARGS.port_file:
        with open(ARGS.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(ARGS.port_file + ".tmp", ARGS.port_file)
    print("PORT %d" % port, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
