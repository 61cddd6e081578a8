#!/usr/bin/env python3
"""bench/fleet.sh's helper and report (Python 3 stdlib only). Modes:

  fleet_report.py --run OHA.json VARIANT REP DURATION HZ TICKS_GW TICKS_REDIS TICKS_NGINX \
      INFO0 INFO1 T0 T1 BUSY0 TOTAL0 BUSY1 TOTAL1 UTICKS_GW UTICKS_REDIS THREADS0 THREADS1 BUCKETS
                                                         -> one JSON line (a measured run)
  fleet_report.py --threads PID...                       -> JSON: the processes' CPU ticks and
                                                            context switches by thread class
  fleet_report.py --monitor MONITOR.txt OHA.json T0 T1   -> JSON: MONITOR's commands by source
  fleet_report.py --acc OHA.json VARIANT SECS RPM CODE REFUSED_BODY INFO0 INFO1 T0 T1
                                                         -> one JSON line (a limit-accuracy run)
  fleet_report.py --report RAW_DIR OUT.md                -> the Markdown report (also printed)

INFO0/INFO1: `redis-cli info all` before and after the run; the report uses the difference of
`cmdstat_*` (calls, usec), `errorstat_*`, the network byte counters and Redis's own CPU.
"""
import json
import os
import re
import statistics
import sys

# Issue 21's: the fleet's own CPU (gateways + Redis) per request against one gateway's.
CPU_RATIO_TARGET = 1.3
# Issue 23's (leased admission): the fleet's gateways against the trio's (three gateways on the
# memory store behind the same nginx), Redis's CPU per request, round trips per request.
TRIO_RATIO_TARGET = 1.15
REDIS_US_TARGET = 2.0
EVALSHA_TARGET = 0.1
ACC_TARGET_PCT = 5.0
# Commands the bench itself sends to Redis around a run (not the gateways').
OWN = {"info", "monitor", "ping", "del", "exists", "scan", "command"}
# The round trip before the upstream call: the admission script (EVALSHA).
# The corrections after the answer run a small script sent with EVAL,
# batched: they are not a request's round trip before its upstream call.
ADMIT_CMDS = ("evalsha",)
# Variants whose own CPU includes redis-server's, and those behind nginx.
ON_REDIS = {"fleet", "redis1"}
BEHIND_NGINX = {"fleet", "nginx1", "trio"}
WHAT = {
    "single": "load generator → one gateway, memory store (no `state:`)",
    "fleet": "load generator → nginx (round robin over three, keepalive 64, `proxy_buffering off`, "
             "`access_log off`) → three gateways with `state: { backend: redis, key_prefix: \"bench:\" }` "
             "→ one `redis-server` (`--save \"\" --appendonly no`)",
    "nginx1": "(diagnostic) load generator → the same nginx → the single gateway: what being behind "
              "the load balancer does to a gateway",
    "redis1": "(diagnostic) load generator → one gateway with `state: redis` (a fleet of one, key prefix "
              "`bench1:`, same redis-server), no load balancer: the Redis path alone",
    "trio": "(diagnostic) load generator → nginx → three gateways on the memory store: the load spread "
            "over three processes, without Redis",
}


def lines(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def parse_info(path):
    out = {"cmd": {}, "err": {}, "stats": {}}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if ":" not in line or line.startswith("#"):
                continue
            k, v = line.split(":", 1)
            if k.startswith("cmdstat_"):
                f_ = dict(x.split("=", 1) for x in v.split(","))
                out["cmd"][k[8:]] = {"calls": int(f_.get("calls", 0)), "usec": int(f_.get("usec", 0)),
                                     "failed": int(f_.get("failed_calls", 0)),
                                     "rejected": int(f_.get("rejected_calls", 0))}
            elif k.startswith("errorstat_"):
                out["err"][k[10:]] = int(v.split("=", 1)[1])
            elif k in ("total_net_input_bytes", "total_net_output_bytes", "total_commands_processed",
                       "used_cpu_sys", "used_cpu_user", "connected_clients", "total_connections_received",
                       "total_reads_processed"):
                out["stats"][k] = float(v)
    return out


def info_delta(p0, p1):
    a, b = parse_info(p0), parse_info(p1)
    cmd = {}
    for name, x in b["cmd"].items():
        y = a["cmd"].get(name, {"calls": 0, "usec": 0, "failed": 0, "rejected": 0})
        d = {k: x[k] - y[k] for k in x}
        if d["calls"]:
            cmd[name] = d
    err = {k: v - a["err"].get(k, 0) for k, v in b["err"].items() if v - a["err"].get(k, 0)}
    st = {k: b["stats"].get(k, 0) - a["stats"].get(k, 0) for k in b["stats"]}
    st["connected_clients"] = b["stats"].get("connected_clients", 0)
    return {"cmd": cmd, "err": err, "stats": st}


def oha(path, secs):
    j = json.load(open(path))
    s, lp = j["summary"], j.get("latencyPercentiles", {})
    codes = {k: int(v) for k, v in j.get("statusCodeDistribution", {}).items()}
    errd = {k: int(v) for k, v in j.get("errorDistribution", {}).items()}
    # requests cut off by the -z deadline are reported as errors by oha; they are not failures
    cut = sum(v for k, v in errd.items() if "deadline" in k.lower())
    ms = lambda v: None if v is None else v * 1000.0  # noqa: E731
    dur = s.get("total") or float(secs)
    ok = codes.get("200", 0)
    return {"ok": ok, "codes": codes, "answered": sum(codes.values()), "cut": cut,
            "conn_errors": {k: v for k, v in errd.items() if "deadline" not in k.lower()},
            "secs": dur, "rps": ok / dur, "p50_ms": ms(lp.get("p50")), "p99_ms": ms(lp.get("p99")),
            "p999_ms": ms(lp.get("p99.9"))}


def gw_calls(cmd):
    """Commands the gateways caused (the bench's own left out)."""
    return {k: v for k, v in cmd.items() if k.split("|")[0] not in OWN}


def mode_run(a):
    (path, variant, rep, secs, hz, t_gw, t_redis, t_ngx, i0, i1, w0, w1, b0, m0, b1, m1, u_gw, u_redis,
     th0, th1, buckets) = a
    r = oha(path, secs)
    hz = int(hz)
    n = r["ok"]
    per = lambda t: int(t) / hz * 1e6 / n if n else None  # noqa: E731
    d = info_delta(i0, i1)
    calls = gw_calls(d["cmd"])
    # Requests in flight when oha's deadline cut them were admitted too (cut = the concurrency).
    answered = (r["answered"] + r["cut"]) or 1
    admit = sum(calls.get(c, {}).get("calls", 0) for c in ADMIT_CMDS)
    r.update(variant=variant, rep=int(rep), errors=r["answered"] - n + sum(r["conn_errors"].values()),
             ticks_gw=int(t_gw), ticks_redis=int(t_redis), ticks_nginx=int(t_ngx), hz=hz,
             cpu_gw_us=per(t_gw), cpu_redis_us=per(t_redis), cpu_nginx_us=per(t_ngx),
             cpu_gw_user_us=per(u_gw), cpu_redis_user_us=per(u_redis),
             threads=thread_delta(json.loads(th0), json.loads(th1), hz, n), buckets=int(buckets or 0),
             wall_s=float(w1) - float(w0),
             machine_busy_pct=100.0 * (int(b1) - int(b0)) / max(1, int(m1) - int(m0)),
             redis=d, evalsha_per_req=admit / answered,
             evalsha_per_read=admit / d["stats"]["total_reads_processed"]
             if d["stats"].get("total_reads_processed") else None,
             redis_cmds_per_req=sum(v["calls"] for v in calls.values()) / answered)
    print(json.dumps(r))


def thread_class(pid, tid, comm):
    if tid == pid:
        return "main"
    return "workers" if comm.startswith("switchyard-work") else "other"


def mode_threads(pids):
    out = {c: {"ticks": 0, "vcs": 0, "ivcs": 0, "n": 0} for c in ("main", "workers", "other")}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                stat = open(f"/proc/{pid}/task/{tid}/stat").read()
                status = open(f"/proc/{pid}/task/{tid}/status").read()
            except FileNotFoundError:
                continue
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            rest = stat[stat.rindex(")") + 2:].split()  # from field 3 (state) on
            c = out[thread_class(pid, tid, comm)]
            c["ticks"] += int(rest[11]) + int(rest[12])  # utime + stime (fields 14, 15)
            c["n"] += 1
            for line in status.splitlines():
                if line.startswith("voluntary_ctxt_switches:"):
                    c["vcs"] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches:"):
                    c["ivcs"] += int(line.split()[1])
    print(json.dumps(out))


def thread_delta(a, b, hz, n):
    if not n:
        return None
    return {c: {"cpu_us": (b[c]["ticks"] - a[c]["ticks"]) / hz * 1e6 / n,
                "vcs": (b[c]["vcs"] - a[c]["vcs"]) / n, "ivcs": (b[c]["ivcs"] - a[c]["ivcs"]) / n,
                "threads": b[c]["n"]} for c in b}


MON_RE = re.compile(r'^(\d+\.\d+) \[(\d+) ([^\]]+)\] (.*)$')
ARG_RE = re.compile(r'"((?:[^"\\]|\\.)*)"')


def mode_monitor(a):
    path, ohap, w0, w1 = a
    w0, w1 = float(w0), float(w1)
    r = oha(ohap, w1 - w0)
    groups, sent, lua, conns = {}, {}, {}, set()
    # Runs of consecutive HINCRBYs sent on one connection: the corrections' pipelined batches (an
    # upper bound on their number: another client's command in between splits a run).
    runs, prev = 0, None
    with open(path, errors="replace") as f:
        for line in f:
            m = MON_RE.match(line.strip())
            if not m or not (w0 <= float(m.group(1)) <= w1):
                continue
            src = "lua" if m.group(3) == "lua" else "sent"
            args = ARG_RE.findall(m.group(4))
            if not args:
                continue
            cmd = args[0].lower()
            if cmd in OWN:
                continue
            if cmd in ("evalsha", "eval") and len(args) > 3:
                key = args[3]
            else:
                key = args[1] if len(args) > 1 else ""
            if src == "sent":
                conns.add(m.group(3))
            cur = (src, m.group(3), cmd)
            if cur[0] == "sent" and cmd == "hincrby" and cur != prev:
                runs += 1
            prev = cur
            (sent if src == "sent" else lua)[cmd] = (sent if src == "sent" else lua).get(cmd, 0) + 1
            g = f"{src} {cmd} {key}"
            groups[g] = groups.get(g, 0) + 1
    print(json.dumps({"requests": r["answered"] + r["cut"], "ok": r["ok"], "window_s": w1 - w0, "sent": sent,
                      "lua": lua, "by_key": groups, "connections": len(conns), "hincrby_runs": runs}))


def mode_acc(a):
    path, variant, secs, rpm, code, refused, i0, i1, w0, w1 = a
    r = oha(path, secs)
    d = info_delta(i0, i1)
    calls = gw_calls(d["cmd"])
    body = open(refused, errors="replace").read()
    answered = (r["answered"] + r["cut"]) or 1
    allowed = int(rpm)
    r.update(variant=variant, allowed=allowed, refused=r["codes"].get("429", 0),
             other={k: v for k, v in r["codes"].items() if k not in ("200", "429")},
             err_pct=100.0 * (r["ok"] - allowed) / allowed,
             after_code=int(code or 0), after_is_rate_limited="gateway_rate_limited" in body,
             redis=d, evalsha_per_req=sum(calls.get(c, {}).get("calls", 0) for c in ADMIT_CMDS) / answered,
             redis_cmds_per_req=sum(v["calls"] for v in calls.values()) / answered,
             wall_s=float(w1) - float(w0))
    print(json.dumps(r))


# ------------------------------------------------------------------ report
def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def f1(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def verdict(ok):
    return "**PASS**" if ok else "**FAIL**"


def evalsha_us(r):
    e = r["redis"]["cmd"].get("evalsha")
    return f"{e['usec'] / e['calls']:.1f}" if e and e["calls"] > 100 else "–"


def pooled_cmds(runs):
    """Sum of the runs' command deltas (the gateways'), and of their answered requests."""
    tot, req, secs = {}, 0, 0.0
    for r in runs:
        req += r["answered"] + r["cut"]
        secs += r["wall_s"]
        for k, v in gw_calls(r["redis"]["cmd"]).items():
            t = tot.setdefault(k, {"calls": 0, "usec": 0, "failed": 0, "rejected": 0})
            for f in t:
                t[f] += v.get(f, 0)
    return tot, req, secs


def report(raw, out):
    meta = json.load(open(f"{raw}/meta.json"))
    runs = lines(f"{raw}/runs.jsonl")
    acc = lines(f"{raw}/acc.jsonl")
    backend = lines(f"{raw}/backend.jsonl")
    try:
        mon = json.load(open(f"{raw}/monitor.json"))
    except (FileNotFoundError, ValueError):
        mon = None
    variants = meta["variants"].split()
    # Backend errors per phase (a run's tag, or start/throughput/accuracy): the increase since the
    # instance's previous snapshot, summed over the fleet's instances.
    seen, bdelta = {}, {}
    for b in backend:
        prev = seen.get(b["instance"], {})
        for op, n in b["errors"].items():
            d = n - prev.get(op, 0)
            if d:
                bdelta.setdefault(b["phase"], {})
                bdelta[b["phase"]][op] = bdelta[b["phase"]].get(op, 0) + d
        seen[b["instance"]] = b["errors"]
    by = {v: [r for r in runs if r["variant"] == v] for v in variants}

    def m(v, k):
        return med(r.get(k) for r in by.get(v, []))

    def own_cpu(r):
        """The CPU the variant needs besides the load balancer: gateways (+ redis for the fleet)."""
        if r["cpu_gw_us"] is None:
            return None
        return r["cpu_gw_us"] + (r["cpu_redis_us"] if r["variant"] in ON_REDIS else 0.0)

    L = ["# switchyard fleet run\n"]
    L.append(f"{meta['when']}, git {meta['git']}, {meta['cpu'].strip()} × {meta['ncpu']}, kernel "
             f"{meta['kernel']}; {meta['loadgen']}, {meta['nginx']} ({meta['nginx_workers']} workers), "
             f"{meta['redis']}; pinning: {meta['pinning']}.\n")
    L.append(
        f"Non-streaming `POST /v1/chat/completions` at c={meta['conc']}, {meta['repeats']} repeats of "
        f"{meta['warmup']} s warm-up + {meta['duration']} s measured per variant, interleaved "
        f"({', '.join(variants)}, …); medians. Every request carries the `bench` client's key "
        f"(rpm {meta['high_rpm']:,}, tpm {meta['high_tpm']:,}: never refused) and goes to a deployment "
        f"with the same rpm/tpm, so the fleet has four windows to charge on Redis per request.\n")
    for v in variants:
        L.append(f"- **{v}**: {WHAT[v]}.")
    L.append("\nCPU µs/request: `utime + stime` from `/proc/PID/stat` before and after the measured run "
             "over the 200s. *own* = what the variant needs besides a load balancer: the gateway(s), "
             "plus redis-server for the fleet; nginx is shown apart.\n")

    L.append("## Throughput and CPU\n")
    L.append("| variant | req/s | p50 ms | p99 ms | CPU µs/req gateways | redis | own (gw + redis) | "
             "× single | nginx | own + nginx | errors | machine busy |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    single_own = med(own_cpu(r) for r in by["single"])
    res = {}
    for v in variants:
        own = med(own_cpu(r) for r in by[v])
        ngx = m(v, "cpu_nginx_us") if v in BEHIND_NGINX else None
        red = m(v, "cpu_redis_us") if v in ON_REDIS else None
        ru = m(v, "cpu_redis_user_us") if v in ON_REDIS else None
        res[v] = own
        ratio = own / single_own if own and single_own else None
        gu = m(v, "cpu_gw_user_us")
        gw_cell = f"{f1(m(v, 'cpu_gw_us'))}" + ("" if gu is None else f" ({gu:.0f} + {m(v, 'cpu_gw_us') - gu:.0f})")
        L.append(f"| {v} | {f1(m(v, 'rps'), 0)} | {f1(m(v, 'p50_ms'), 3)} | {f1(m(v, 'p99_ms'), 3)} | "
                 f"{gw_cell} | {f1(red)}{'' if red is None or ru is None else f' ({ru:.0f} + {red - ru:.0f})'} | {f1(own)} | {f1(ratio, 2)}× | {f1(ngx)} | "
                 f"{f1(None if ngx is None else own + ngx)} | {sum(r['errors'] for r in by[v])} | "
                 f"{f1(m(v, 'machine_busy_pct'), 0)} % |")
    L.append("\nGateways, redis: total (user + system). `machine busy`: the whole machine's CPU use during the measured runs (all CPUs; other "
             "work on this shared box included).\n")
    L.append("Per run (paired ratio = the fleet's own CPU/req ÷ the single gateway's in the same repeat):\n")
    L.append("| repeat | variant | req/s | p99 ms | gw µs/req | redis µs/req | nginx µs/req | own × single | "
             "EVALSHA/req | Redis cmds/req | µs per EVALSHA (Redis) | EVALSHA per Redis read | window buckets | "
             "fleet backend errors |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    paired = []
    for rep in sorted({r["rep"] for r in runs}):
        s = next((r for r in by["single"] if r["rep"] == rep), None)
        for v in variants:
            r = next((x for x in by[v] if x["rep"] == rep), None)
            if not r:
                continue
            ratio = own_cpu(r) / own_cpu(s) if s and own_cpu(s) and own_cpu(r) else None
            if v == "fleet" and ratio:
                paired.append(ratio)
            L.append(f"| {rep} | {v} | {f1(r['rps'], 0)} | {f1(r['p99_ms'], 3)} | {f1(r['cpu_gw_us'])} | "
                     f"{f1(r['cpu_redis_us']) if v in ON_REDIS else '–'} | "
                     f"{f1(r['cpu_nginx_us']) if v in BEHIND_NGINX else '–'} | "
                     f"{f1(ratio, 2) + '×' if v != 'single' else '–'} | {r['evalsha_per_req']:.3f} | "
                     f"{r['redis_cmds_per_req']:.2f} | {evalsha_us(r)} | "
                     f"{f1(r.get('evalsha_per_read') if v in ON_REDIS else None, 2)} | {r.get('buckets') or '–'} | "
                     f"{bdelta.get(f'{v}-r{rep}') or '–'} |")
    L.append("\nEVALSHA and Redis commands per request: `INFO commandstats` around the run, over the requests "
             "the gateways got (answered + the ones oha's deadline cut, which were admitted too). For "
             "variants not on Redis they are the idle fleet's background (heartbeats, the events reader) "
             "during that run, per its request. *µs per EVALSHA*: Redis's own time per admission script "
             "(commandstats `usec`, the script's commands included). *EVALSHA per Redis read*: admissions "
             "over `total_reads_processed` (Redis's reads from client sockets, every command included): "
             "how many admissions shared a pipelined write. *window buckets*: `HLEN` of the "
             "client's tpm window before the run — the buckets the script reads per window (10 when "
             f"full; a 2 req/s trickle through the Redis variants filled them for {meta.get('fill_s', 0)} s "
             "before the runs and kept them full while the other variants ran; it is paused while a Redis "
             "variant is measured). "
             "*fleet backend errors*: the increase of "
             "`switchyard_state_backend_errors_total{op}` over the three instances during the run (and its "
             "warm-up): `admit` = an admission that got no answer within 50 ms, so that instance decided "
             "on its own counters until its next heartbeat (≤ 1 s) brought it back; `adjust` = corrections "
             "dropped meanwhile (left at the estimate on Redis).\n")

    L.append("### The gateways' CPU by thread\n")
    L.append("Per request, summed over the variant's gateways (medians of the runs): *main* = each process's "
             "main thread, the runtime of the admin listener and signals — in a fleet also of the shared "
             "Redis connection (the `ConnectionManager` and its driver task), the heartbeat, the events "
             "reader and the corrections writer; *workers* = the per-core client runtimes "
             "(`switchyard-worker-N`) that serve the requests; *other* = the decision-log writer, the config "
             "watcher. *wakeups* = voluntary context switches (the thread went to sleep and was woken again) "
             "per request.\n")
    L.append("| variant | main µs/req | workers µs/req | other µs/req | main wakeups/req | workers wakeups/req | "
             "workers preempted/req |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    for v in variants:
        th = [r.get("threads") for r in by[v] if r.get("threads")]
        if not th:
            continue
        g = lambda c, k: med(t[c][k] for t in th)  # noqa: E731
        L.append(f"| {v} | {f1(g('main', 'cpu_us'))} | {f1(g('workers', 'cpu_us'))} | {f1(g('other', 'cpu_us'))} | "
                 f"{f1(g('main', 'vcs'), 2)} | {f1(g('workers', 'vcs'), 2)} | {f1(g('workers', 'ivcs'), 2)} |")
    L.append("")

    # Redis commands
    L.append("## Redis commands per request (fleet)\n")
    tot, req, secs = pooled_cmds(by["fleet"])
    total = sum(v["calls"] for v in tot.values())
    admit = sum(tot.get(c, {}).get("calls", 0) for c in ADMIT_CMDS)
    L.append(f"`INFO commandstats` before and after each measured fleet run, summed over the "
             f"{len(by['fleet'])} runs: {req:,} requests in {secs:.1f} s (answered + cut by oha's deadline "
             "after their admission). Redis counts the commands "
             "the admission script runs (`redis.call`) as well as the ones sent to it, so the total is "
             "commands *executed*, not round trips; the split is in the MONITOR sample below.\n")
    L.append("| command | calls | per request | per second | µs per call (Redis) | failed |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for k, v in sorted(tot.items(), key=lambda kv: -kv[1]["calls"]):
        L.append(f"| `{k}` | {v['calls']:,} | {v['calls'] / max(1, req):.3f} | {v['calls'] / max(secs, 1e-9):.0f} | "
                 f"{v['usec'] / max(1, v['calls']):.2f} | {v['failed'] + v['rejected']} |")
    L.append(f"| **total** | {total:,} | **{total / max(1, req):.3f}** | {total / max(secs, 1e-9):.0f} | | |")
    errs = {}
    for r in by["fleet"]:
        for k, v in r["redis"]["err"].items():
            errs[k] = errs.get(k, 0) + v
    net_in = sum(r["redis"]["stats"].get("total_net_input_bytes", 0) for r in by["fleet"])
    net_out = sum(r["redis"]["stats"].get("total_net_output_bytes", 0) for r in by["fleet"])
    rcpu = sum(r["redis"]["stats"].get("used_cpu_sys", 0) + r["redis"]["stats"].get("used_cpu_user", 0)
               for r in by["fleet"])
    L.append(f"\nRedis errors (`errorstat`): {errs or 'none'}. Bytes per request: {net_in / max(1, req):.0f} in, "
             f"{net_out / max(1, req):.0f} out. Redis's own CPU count (`used_cpu_*`): "
             f"{rcpu * 1e6 / max(1, req):.1f} µs/request (cf. /proc above). "
             f"Clients connected: {by['fleet'][-1]['redis']['stats'].get('connected_clients', 0):.0f} "
             "(including the bench's redis-cli).\n")
    admit_req = admit / max(1, req)
    L.append(f"**Round trips before the upstream call**: `EVALSHA` per request = "
             f"{admit:,} / {req:,} = **{admit_req:.3f}** (the admission script is the only command "
             "sent on a request's way to the upstream; the corrections after the answer are `EVAL`s "
             "of a small script, summed per counter and pipelined in batches, not counted here).\n")

    if mon:
        L.append("### Which are sent and which run inside the script (MONITOR sample)\n")
        mr = max(1, mon["requests"])
        L.append(f"A separate {meta['monitor_s']} s run through the fleet at c={meta.get('monitor_c', meta['conc'])} "
                 "with `redis-cli monitor` attached "
                 f"(not part of any figure above): {mon['requests']:,} requests, lines within the load "
                 f"generator's {mon['window_s']:.1f} s. *sent* = a command a gateway sent (one per "
                 "pipeline element; a pipeline is one round trip), *in script* = run by the admission "
                 f"script (`[0 lua]`). Commands came over {mon['connections']} connections.\n")
        L.append("| source | command | key | per request |")
        L.append("|---|---|---|---:|")
        for g, n in sorted(mon["by_key"].items(), key=lambda kv: -kv[1]):
            src, cmd, key = (g.split(" ", 2) + ["", ""])[:3]
            L.append(f"| {'sent' if src == 'sent' else 'in script'} | `{cmd}` | `{key}` | {n / mr:.3f} |")
        s_tot, l_tot = sum(mon["sent"].values()), sum(mon["lua"].values())
        L.append(f"\nSent: {s_tot / mr:.3f} per request; in script: {l_tot / mr:.3f}; all: "
                 f"{(s_tot + l_tot) / mr:.3f}.")
        hr = mon.get("hincrby_runs") or 0
        if hr:
            L.append(f"The corrections (`hincrby` sent after the answers) came in {hr:,} runs of consecutive "
                     f"commands on one connection, {mon['sent'].get('hincrby', 0) / hr:.1f} on average: "
                     "pipelined batches, not a round trip each (a run is a batch or a piece of one).")
        L.append("")

    # accuracy
    L.append("## Limit accuracy\n")
    L.append(f"The `limited` client (rpm {meta['acc_rpm']}, no tpm) on a deployment without limits, from a "
             f"fresh window (its Redis keys deleted first; the single gateway never saw it before), "
             f"loaded at c={meta['acc_c']} for {meta['acc_s']} s, far above {meta['acc_rpm']}/min. The window "
             "slides over 60 s in 10 buckets, so in a burst of up to 54 s from a fresh start at most "
             f"{meta['acc_rpm']} may be admitted in all; beyond that every request is a 429 "
             "`gateway_rate_limited`. `single` is the reference (one gateway, memory store).\n")
    L.append("| variant | requests | 200 (admitted) | 429 | other | allowed | error | a request after: | "
             "EVALSHA/req | Redis cmds/req |")
    L.append("|---|---:|---:|---:|---|---:|---:|---|---:|---:|")
    for a in acc:
        L.append(f"| {a['variant']} | {a['answered']:,} | {a['ok']} | {a['refused']:,} | {a['other'] or '–'} | "
                 f"{a['allowed']} | {a['err_pct']:+.1f} % | {a['after_code']}"
                 f"{' gateway_rate_limited' if a['after_is_rate_limited'] else ''} | {a['evalsha_per_req']:.3f} | "
                 f"{a['redis_cmds_per_req']:.3f} |")
    L.append("")

    # backend errors
    L.append("## Shared state health\n")
    L.append("`switchyard_state_backend_errors_total{op}` per fleet instance (a count here means the "
             "instance decided on its own counters for a while: Redis slower than 50 ms or away), and its "
             "`/admin/state` after each phase.\n")
    L.append("| after | instance | shared_state | instances seen | backend errors (cumulative) |")
    L.append("|---|---|---|---:|---|")
    for b in backend:
        if b["phase"] not in ("start", "throughput", "monitor", "accuracy"):
            continue
        e = {k: v for k, v in b["errors"].items() if v}
        L.append(f"| {b['phase']} | {b['instance']} | {b['shared_state']} | {b['instances']} | {e or 0} |")
    # The measured phases only: the MONITOR sample slows Redis down on purpose.
    last = {}
    for phase, d in bdelta.items():
        if phase != "monitor":
            for op, n in d.items():
                last[op] = last.get(op, 0) + n
    backend_ok = not any(last.values())
    if bdelta.get("monitor"):
        L.append(f"During the MONITOR sample (not measured; MONITOR slows Redis down): {bdelta['monitor']}.\n")
    L.append("")

    # the floor under the target on this machine
    try:
        sc = json.load(open(f"{raw}/script.json"))
    except (FileNotFoundError, ValueError):
        sc = None
    trio = res.get("trio")
    if sc and trio and single_own:
        script_us = sc["ticks"] / sc["hz"] * 1e6 / sc["n"]
        fleet_own = res.get("fleet")
        L.append("## The floor under the fleet's CPU on this machine\n")
        L.append(f"What a fleet cannot go below here, whatever its shared state: the load spread over three "
                 f"gateways (*trio*: the same nginx, the memory store). For scale, the cost a request would "
                 f"add if every admission ran the admission script on Redis (before leased admission, each "
                 f"did): redis-benchmark, `EVALSHA` of the gateways' script with the bench's four windows, "
                 f"pipelined {sc['pipeline']} deep over 3 connections, {sc['n']:,} calls, no gateway.\n")
        L.append("| part | CPU µs/request | × single |\n|---|---:|---:|")
        L.append(f"| single (the reference) | {f1(single_own)} | 1.00× |")
        L.append(f"| **floor**: trio, three gateways, no Redis | **{f1(trio)}** | **{trio / single_own:.2f}×** |")
        L.append(f"| (scale) the admission script alone on Redis, per call | {f1(script_us)} | "
                 f"{script_us / single_own:.2f}× |")
        L.append(f"| fleet, measured | {f1(fleet_own)} | "
                 f"{f1(fleet_own / single_own if fleet_own else None, 2)}× |")
        over = f"{(fleet_own / trio - 1) * 100:+.0f} %" if fleet_own else "–"
        L.append(f"\nThe fleet is {over} over the trio: sharing limits through Redis costs that much once "
                 f"requests are admitted from leased slices. Issue 21's target ({CPU_RATIO_TARGET}× one "
                 f"gateway) is {'below' if trio / single_own > CPU_RATIO_TARGET else 'above'} the trio "
                 f"itself: spreading the load over three gateways behind nginx costs "
                 f"{trio / single_own:.2f}× one gateway here before anything is shared.\n")

    # targets
    L.append("## Targets\n")
    L.append("| target | measured | result |\n|---|---|---|")
    fo = res.get("fleet")
    ratio = fo / single_own if fo and single_own else None
    L.append(f"| fleet CPU/request (3 gateways + redis, not nginx) ≤ {CPU_RATIO_TARGET}× single's | "
             f"{f1(fo)} vs {f1(single_own)} µs = {f1(ratio, 2)}× (medians; paired per repeat: "
             f"{', '.join(f'{x:.2f}×' for x in paired) or '–'}) | {verdict(ratio is not None and ratio <= CPU_RATIO_TARGET)} |")
    fgw, tgw, fred = m("fleet", "cpu_gw_us"), m("trio", "cpu_gw_us"), m("fleet", "cpu_redis_us")
    trio_ratio = fgw / tgw if fgw and tgw else None
    L.append(f"| the fleet's gateways' CPU/request ≤ {TRIO_RATIO_TARGET}× the trio's | "
             f"{f1(fgw)} vs {f1(tgw)} µs = {f1(trio_ratio, 2)}× (medians) | "
             f"{verdict(trio_ratio is not None and trio_ratio <= TRIO_RATIO_TARGET)} |")
    L.append(f"| Redis CPU/request (its own CPU time over the fleet's requests) ≤ {REDIS_US_TARGET:g} µs | "
             f"{f1(fred)} µs (median) | {verdict(fred is not None and fred <= REDIS_US_TARGET)} |")
    L.append(f"| round trips to Redis ≤ {EVALSHA_TARGET:g} per request (admissions and lease renewals: "
             f"`EVALSHA`) | EVALSHA/request {admit_req:.3f} | {verdict(admit_req <= EVALSHA_TARGET)} |")
    for a in acc:
        if a["variant"] != "fleet":
            continue
        ok = abs(a["err_pct"]) <= ACC_TARGET_PCT
        L.append(f"| fleet-wide client rpm within {ACC_TARGET_PCT:g} % of the limit | admitted {a['ok']} of "
                 f"{a['allowed']} allowed ({a['err_pct']:+.1f} %) | {verdict(ok)} |")
    L.append(f"| (check) no fleet instance fell back to local state (an admission over 50 ms) in the "
             f"measured phases | {'none' if backend_ok else ', '.join(f'{k}: {v}' for k, v in last.items())} "
             f"(over the three instances) | {verdict(backend_ok)} |")
    L.append(f"| (check) no errors in the throughput runs | "
             f"{sum(r['errors'] for r in runs)} | {verdict(sum(r['errors'] for r in runs) == 0)} |")
    text = "\n".join(L) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)


def main():
    mode, args = sys.argv[1], sys.argv[2:]
    {"--run": mode_run, "--monitor": mode_monitor, "--acc": mode_acc, "--threads": mode_threads,
     "--report": lambda a: report(*a)}[mode](args)


if __name__ == "__main__":
    main()
