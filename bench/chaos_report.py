#!/usr/bin/env python3
"""Report for bench/chaos.sh: chaos_report.py RAW_DIR OUT.md DEPLOYMENT=CONCURRENCY..."""
import collections
import json
import os
import re
import sys

raw, out = sys.argv[1], sys.argv[2]
limits = dict(a.split("=", 1) for a in sys.argv[3:])
limits = {k: int(v) for k, v in limits.items()}
deps = list(limits)

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def metrics(path):
    """{(name, frozenset(labels)): value}"""
    m = {}
    if not os.path.exists(path):
        return m
    for ln in open(path):
        if ln.startswith("#") or not ln.strip():
            continue
        g = LINE.match(ln)
        if not g:
            continue
        labels = frozenset(LABEL.findall(g.group(2) or ""))
        try:
            m[(g.group(1), labels)] = float(g.group(3))
        except ValueError:
            pass
    return m


def total(m, name, **want):
    return sum(v for (n, ls), v in m.items()
               if n == name and all((k, w) in ls for k, w in want.items()))


def by(m, name, key, **want):
    d = collections.Counter()
    for (n, ls), v in m.items():
        if n == name and all((k, w) in ls for k, w in want.items()):
            d[dict(ls).get(key, "")] += v
    return d


def delta(a, b):
    return {k: v - a.get(k, 0.0) for k, v in b.items()}


def fmt(x, unit=""):
    return "n/a" if x is None else f"{x:.1f}{unit}"


def deployment_of(entry):
    for k in ("id", "deployment", "name"):
        if k in entry:
            return entry[k]
    return None


def state_list(s):
    if s is None:
        return []
    if isinstance(s, dict):
        for k in ("deployments", "state"):
            if isinstance(s.get(k), list):
                return s[k]
            if isinstance(s.get(k), dict):
                return [dict(v, id=k2) for k2, v in s[k].items()]
        return [dict(v, id=k) for k, v in s.items() if isinstance(v, dict)]
    return s


SKIPPED = ("gateway_rate_limited", "circuit_open")
# Decision log, per run (the `stream` field): statuses, non-200 reasons, and retries per
# deployment (an attempt that follows an attempt on the same deployment in one request; the
# `switchyard_retries_total` metric attributes a request's retries to the deployment that served it).
dl = {"nonstream": collections.Counter(), "stream": collections.Counter()}
reasons = collections.Counter()
dretries = {"nonstream": collections.Counter(), "stream": collections.Counter()}
path = f"{raw}/decisions.jsonl"
if os.path.exists(path):
    for ln in open(path):
        try:
            e = json.loads(ln)
        except ValueError:
            continue
        if "request_id" not in e:
            continue
        run = "stream" if e.get("stream") else "nonstream"
        st = e.get("status")
        dl[run][st] += 1
        att = [a for a in e.get("attempts") or [] if a.get("outcome") not in SKIPPED]
        for a, b in zip(att, att[1:]):
            if a.get("deployment") == b.get("deployment"):
                dretries[run][b.get("deployment")] += 1
        if str(st) != "200":
            outs = " → ".join(f"{a.get('deployment', '?')}:{a.get('outcome', '?')}"
                              for a in e.get("attempts", []) or [])
            reasons[(run, st, e.get("fallback_reason"), outs[:300])] += 1

lines = ["# switchyard chaos benchmark", ""]
targets = []
prev = {}
runs = [r for r in ("nonstream", "stream") if os.path.exists(f"{raw}/{r}-oha.json")]
for run in runs:
    j = json.load(open(f"{raw}/{run}-oha.json"))
    codes = {k: int(v) for k, v in j.get("statusCodeDistribution", {}).items()}
    errs = {k: int(v) for k, v in j.get("errorDistribution", {}).items()}
    sent = sum(codes.values()) + sum(errs.values())
    ok = codes.get("200", 0)
    lp = j.get("latencyPercentiles", {})
    ms = lambda v: None if v is None else v * 1000.0
    cur = metrics(f"{raw}/{run}-metrics.txt")
    m = delta(prev, cur)
    prev = cur
    reqs = total(m, "switchyard_requests_total")
    attempts = by(m, "switchyard_upstream_attempts_total", "deployment")
    att_codes = collections.defaultdict(collections.Counter)
    for (n, ls), v in m.items():
        if n == "switchyard_upstream_attempts_total" and v:
            d = dict(ls)
            att_codes[d.get("deployment", "")][d.get("code", "")] += v
    retries = by(m, "switchyard_retries_total", "deployment")
    fallbacks = total(m, "switchyard_fallbacks_total")
    state = state_list(json.load(open(f"{raw}/{run}-state.json")))
    circuit = {deployment_of(e): e.get("circuit") for e in state}
    maxin = collections.Counter()
    maxconn = collections.Counter()
    polls = 0
    for ln in open(f"{raw}/{run}-poll.jsonl"):
        try:
            p = json.loads(ln)
        except ValueError:
            continue
        polls += 1
        for e in state_list(p.get("state")):
            d = deployment_of(e)
            maxin[d] = max(maxin[d], int(e.get("inflight", 0)))
        for k, v in (p.get("conns") or {}).items():
            maxconn[f"{k}/gpt-4o-mini"] = max(maxconn[f"{k}/gpt-4o-mini"], int(v))
    dur = j["summary"].get("total") or 0
    tot_att = sum(attempts.values())
    sent_up = {d: sum(v for c, v in att_codes[d].items() if c not in SKIPPED) for d in deps}
    tot_up = sum(sent_up.values())

    lines += [f"## {'Non-streaming' if run == 'nonstream' else 'Streaming'} run", ""]
    lines += ["| figure | value |", "|---|---|",
              f"| requests sent (oha) | {sent} at c={j.get('summary', {}).get('connections', '') or 64} in {dur:.1f} s |",
              f"| HTTP 200 | {ok} ({100.0 * ok / sent if sent else 0:.2f} %) |",
              f"| other statuses | {', '.join(f'{k}: {v}' for k, v in sorted(codes.items()) if k != '200') or 'none'} |",
              f"| client-side errors | {', '.join(f'{k}: {v}' for k, v in errs.items()) or 'none'} |",
              f"| p50 / p99 / max latency | {fmt(ms(lp.get('p50')), ' ms')} / {fmt(ms(lp.get('p99')), ' ms')} / {fmt(ms(j['summary'].get('slowest')), ' ms')} |",
              f"| gateway requests (`switchyard_requests_total`) | {reqs:.0f} |",
              f"| attempts / request (`switchyard_upstream_attempts_total`, incl. skips) | {tot_att / reqs if reqs else 0:.2f} ({tot_att:.0f}) |",
              f"| upstream calls / request (without `gateway_rate_limited` / `circuit_open` skips) | {tot_up / reqs if reqs else 0:.2f} ({tot_up:.0f}) |",
              f"| retries (`switchyard_retries_total`) | {sum(retries.values()):.0f} (decision log: {sum(dretries[run].values())}) |",
              f"| decision-log statuses | {', '.join(f'{k}: {v}' for k, v in sorted(dl[run].items(), key=str))} |",
              f"| fallbacks (`switchyard_fallbacks_total`) | {fallbacks:.0f} |",
              f"| `/admin/state` polls | {polls} |", ""]
    lines += ["| deployment | attempts by code (metric) | upstream calls | share of upstream calls | retries on it (decision log) | served (200) | circuit at end | max in-flight seen | concurrency | max open gateway→mock conns |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for d in deps:
        a = attempts.get(d, 0)
        cs = ", ".join(f"{c}: {v:.0f}" for c, v in sorted(att_codes[d].items(), key=lambda x: -x[1])) or "—"
        conn = maxconn.get(d)
        served = total(m, "switchyard_requests_total", deployment=d, status="200")
        lines.append(f"| `{d}` | {a:.0f} ({cs}) | {sent_up[d]:.0f} | {100.0 * sent_up[d] / tot_up if tot_up else 0:.1f} % | "
                     f"{dretries[run].get(d, 0)} | {served:.0f} | {circuit.get(d, '?')} | "
                     f"{maxin.get(d, 0)} | {limits[d]} | {conn if conn is not None else 'n/a (no listener)'} |")
    lines += ["", "Max open gateway→mock connections (`ss`) is the upstream pool size, an upper bound of in-flight "
              "that can exceed the concurrency (idle pooled connections); the target uses `/admin/state` `inflight`.", ""]
    targets.append((f"{run}: 100 % HTTP 200", ok == sent and sent > 0, f"{ok}/{sent}"))
    over = [f"{d} {maxin.get(d, 0)}>{limits[d]}" for d in deps if maxin.get(d, 0) > limits[d]]
    targets.append((f"{run}: no deployment above its concurrency (`/admin/state` inflight)",
                    not over and polls > 0, ", ".join(over) or f"max {dict((d, maxin.get(d, 0)) for d in deps)}"))

if reasons:
    lines += ["## Non-200 answers (decision log)", "", "| run | status | fallback_reason | attempts | requests |", "|---|---|---|---|---|"]
    for (run, st, fr, outs), v in reasons.most_common(15):
        lines.append(f"| {run} | {st} | {fr} | {outs} | {v} |")
    lines.append("")

lines += ["## Targets", "", "| target | result | detail |", "|---|---|---|"]
for name, good, detail in targets:
    lines.append(f"| {name} | {'PASS' if good else 'FAIL'} | {detail} |")
lines.append("")
text = "\n".join(lines)
print(text)
open(out, "w").write(text)
