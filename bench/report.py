#!/usr/bin/env python3
"""Turn bench/results/raw/*.jsonl into the Markdown report (stdlib only).

Usage: report.py RAW_DIR OUT_MD
RAW_DIR holds runs.jsonl (one load run a line), ttfb.jsonl (one TTFB run a
line) and meta.json (environment and idle RSS), all written by run.sh.

Translated lanes are recorded with lane "t64-SUB" / "ts64-SUB" (SUB in
TL_SUBS) and targets direct/switchyard; TTFB runs of translated lanes carry
lane "ts64-SUB". Runs flagged "ref" are nginx runs of a plain lane made only
as the CPU yardstick of the translated and cloud lanes; they stay out of the
first table. Cloud lanes (CL_LANES: OpenAI door → Bedrock Converse / Vertex
Gemini) have targets direct/nginx/switchyard and their own table; cloud.json
holds the mock's counters (Vertex token requests, SigV4 verified/refused).
"""
import json
import os
import statistics
import sys

TARGETS = ["direct", "nginx", "switchyard", "governed", "cached", "traced", "defaults", "probed",
           "shadowed"]
LANE_ORDER = ["c1", "c64", "c256", "s64", "g1", "g64", "h64", "o64", "d64", "p64", "sh64"]
LANE_NAME = {
    "c1": "non-stream c=1",
    "c64": "non-stream c=64",
    "c256": "non-stream c=256",
    "s64": "stream(20 chunks) c=64",
    "g1": "governed non-stream c=1",
    "g64": "governed non-stream c=64",
    "h64": "cache hit non-stream c=64",
    "o64": "traced non-stream c=64",
    "p64": "probing (20 idle deployments probed each second) non-stream c=64",
    "d64": "defaults (decision log + usage store) non-stream c=64",
    "sh64": "shadowing (5% of requests also sent to a second deployment) non-stream c=64",
}
# The traced lane (OTLP export on, 100% sampling, a collector running) against the plain one.
TRACE_CPU_LIMIT = 1.15
# Probes run beside the request path (issue: "no per-request work beyond a few atomic
# reads"): the probing gateway within 5% of the plain one, which is the runs' own noise.
PROBE_CPU_LIMIT = 1.05
# Shadow traffic at 5%: 5% more upstream calls (and their comparison) off the request path; the
# primary's latency is the plain lane's within the runs' noise.
SHADOW_CPU_LIMIT = 1.10
SHADOW_LATENCY_LIMIT = 1.10
# The cache-hit lane: every request answered from memory, against nginx→mock.
CACHE_RPS_LIMIT = 1.5
# The governed lanes (virtual key, budget, rpm/tpm, SQLite usage store) against the plain ones.
GOV_CPU_LIMIT = 1.3
GOV_P99_LIMIT_MS = 0.1
STORE_ROWS_LIMIT = 20000
# translated lanes: mode -> plain OpenAI lane whose nginx CPU/request is the yardstick
TL_MODES = {"t64": "c64", "ts64": "s64"}
TL_SUBS = ["oa2an", "oa2gm", "an2oa", "rs2oa"]
TL_SUB_NAME = {"oa2an": "OpenAI→Anthropic", "oa2gm": "OpenAI→Gemini", "an2oa": "Anthropic→OpenAI",
               "rs2oa": "Responses→OpenAI"}
TL_CPU_LIMIT = 3.0
# cloud lanes (issue 24): OpenAI door → Bedrock Converse / Vertex Gemini on the mock, c=64;
# the yardstick is nginx's CPU/request on the plain OpenAI lane of the same mode
CL_LANES = ["b64", "bs64", "v64", "vs64"]
CL_NAME = {"b64": "OpenAI → Bedrock Converse", "bs64": "OpenAI → Bedrock ConverseStream (20 chunks)",
           "v64": "OpenAI → Vertex Gemini", "vs64": "OpenAI → Vertex Gemini stream (20 chunks)"}
CL_REF = {"b64": "c64", "bs64": "s64", "v64": "c64", "vs64": "s64"}
CL_CPU_LIMIT = 2.5


def tl_name(lane):
    mode, sub = lane.split("-", 1)
    return f"{TL_SUB_NAME[sub]} {LANE_NAME[TL_MODES[mode]]}"


def load_jsonl(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=2, signed=False):
    if x is None:
        return "–"
    s = f"{x:+.{nd}f}" if signed else f"{x:.{nd}f}"
    return s


def pooled_c1(raw, target, lane="c1"):
    """A sliced c=1 lane's percentiles over every request of every repeat
    (run.sh keeps each latency, in µs, in lat-LANE-TARGET-rN.txt)."""
    lat = []
    for name in sorted(os.listdir(raw)):
        if name.startswith(f"lat-{lane}-{target}-r") and name.endswith(".txt"):
            with open(os.path.join(raw, name)) as f:
                lat.extend(int(x) / 1000.0 for x in f.read().split())
    if not lat:
        return None
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]
    return {"p50": pct(0.5), "p99": pct(0.99), "p999": pct(0.999), "pooled": len(lat)}


def main():
    raw, out = sys.argv[1], sys.argv[2]
    runs = load_jsonl(os.path.join(raw, "runs.jsonl"))
    ttfb = load_jsonl(os.path.join(raw, "ttfb.jsonl"))
    with open(os.path.join(raw, "meta.json")) as f:
        meta = json.load(f)

    def summarize(rs):
        rps = [r["rps"] for r in rs]
        return {
            "n": len(rs),
            "rps": med(rps),
            "rps_spread": (max(rps) - min(rps)) / med(rps) * 100 if med(rps) else None,
            "p50": med(r["p50_ms"] for r in rs),
            "p99": med(r["p99_ms"] for r in rs),
            "p999": med(r["p999_ms"] for r in rs),
            "cpu": med(r.get("cpu_us_per_req") for r in rs),
            "mock_cpu": med(r.get("mock_cpu_us_per_req") for r in rs),
            "hwm": med(r.get("hwm_mib") for r in rs),
            "errors": sum(r["errors"] for r in rs),
            "ok": sum(r["ok"] for r in rs),
        }

    # (target, lane) -> median of each metric over the repeats
    agg = {}
    for t in TARGETS:
        for lane in LANE_ORDER:
            rs = [r for r in runs if r["target"] == t and r["lane"] == lane and not r.get("ref")]
            if rs:
                agg[(t, lane)] = summarize(rs)
        # sliced c=1: percentiles over all requests pooled, not the median of the repeats
        for c1 in ("c1", "g1"):
            pooled = pooled_c1(raw, t, c1) if (t, c1) in agg else None
            if pooled:
                agg[(t, c1)].update(pooled)
    lanes = [l for l in LANE_ORDER if any((t, l) in agg for t in TARGETS)]
    # translated lanes, and nginx's plain-lane CPU yardstick (its lane's runs or the "ref" runs)
    tl_lanes = [f"{m}-{s}" for m in TL_MODES for s in TL_SUBS]
    tagg = {}
    for t in ("direct", "switchyard"):
        for lane in tl_lanes:
            rs = [r for r in runs if r["target"] == t and r["lane"] == lane]
            if rs:
                tagg[(t, lane)] = summarize(rs)
    tl_run = [l for l in tl_lanes if any((t, l) in tagg for t in ("direct", "switchyard"))]
    nref = {}
    for mode, plain in TL_MODES.items():
        rs = [r for r in runs if r["target"] == "nginx" and r["lane"] == plain]
        if rs and any(l.startswith(mode + "-") for l in tl_run):
            nref[mode] = summarize(rs)
            nref[mode]["ref_only"] = all(r.get("ref") for r in rs)
    # cloud lanes, and nginx's plain-lane yardstick per mode (its lane's runs or the "ref" runs)
    cagg = {}
    for t in ("direct", "nginx", "switchyard"):
        for lane in CL_LANES:
            rs = [r for r in runs if r["target"] == t and r["lane"] == lane]
            if rs:
                cagg[(t, lane)] = summarize(rs)
    cl_run = [l for l in CL_LANES if any(k[1] == l for k in cagg)]
    cref = {}  # plain lane -> (summary, {rep: cpu})
    for plain in sorted({CL_REF[l] for l in cl_run}):
        rs = [r for r in runs if r["target"] == "nginx" and r["lane"] == plain]
        if rs:
            cref[plain] = (summarize(rs), {r["rep"]: r.get("cpu_us_per_req") for r in rs})

    L = []
    L.append("# switchyard benchmark — latest run")
    L.append("")
    L.append(f"- when: {meta.get('when')}; git: `{meta.get('git')}`")
    L.append(f"- machine: {meta.get('cpu')}, {meta.get('ncpu')} CPUs; kernel {meta.get('kernel')}")
    L.append(f"- load generator: {meta.get('loadgen')}; pinning: {meta.get('pinning')}")
    L.append(f"- nginx: {meta.get('nginx')} (worker_processes {meta.get('nginx_workers')}, upstream keepalive 64)")
    L.append(f"- runs: {meta.get('duration')} s measured after {meta.get('warmup')} s warm-up, "
             f"{meta.get('repeats')} repeats interleaved (direct, nginx, switchyard per lane); medians shown")
    if meta.get("c1_slices") and any("pooled" in agg.get((t, "c1"), {}) for t in TARGETS):
        L.append(f"- c=1: each repeat's run split into {meta['c1_slices']} slices, the targets taking turns "
                 "slice by slice (order rotating); its percentiles are over all requests of all repeats pooled")
    L.append("")
    L.append("## Load lanes (median of repeats)")
    L.append("")
    L.append("| lane | target | req/s | spread | p50 ms | p99 ms | p99.9 ms | +p50 ms | +p99 ms | CPU µs/req | peak RSS MiB | errors |")
    L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for lane in lanes:
        d = agg.get(("direct", lane))
        for t in TARGETS:
            a = agg.get((t, lane))
            if not a:
                continue
            dp50 = a["p50"] - d["p50"] if d and t != "direct" else None
            dp99 = a["p99"] - d["p99"] if d and t != "direct" else None
            L.append(
                f"| {LANE_NAME[lane]} | {t} | {a['rps']:.0f} | ±{a['rps_spread'] / 2:.0f}% | "
                f"{fmt(a['p50'], 3)} | {fmt(a['p99'], 3)} | {fmt(a['p999'], 3)} | "
                f"{fmt(dp50, 3, True)} | {fmt(dp99, 3, True)} | {fmt(a['cpu'], 1)} | {fmt(a['hwm'], 1)} | "
                f"{a['errors']} |"
            )
    L.append("")

    # TTFB
    tt = {}
    for t in TARGETS:
        rs = [r for r in ttfb if r["target"] == t and r.get("n") and not r.get("lane")]
        if rs:
            tt[t] = {"p50": med(r["p50_ms"] for r in rs), "p99": med(r["p99_ms"] for r in rs),
                     "n": sum(r["n"] for r in rs), "errors": sum(r.get("errors", 0) for r in rs)}
    if tt:
        L.append("## Streaming time to first SSE event, c=1 (median of repeats)")
        L.append("")
        L.append("| target | TTFB p50 ms | TTFB p99 ms | +p50 ms | +p99 ms | requests | errors |")
        L.append("|---|--:|--:|--:|--:|--:|--:|")
        for t in TARGETS:
            a = tt.get(t)
            if not a:
                continue
            d = tt.get("direct")
            dp50 = a["p50"] - d["p50"] if d and t != "direct" else None
            dp99 = a["p99"] - d["p99"] if d and t != "direct" else None
            L.append(f"| {t} | {a['p50']:.3f} | {a['p99']:.3f} | {fmt(dp50, 3, True)} | "
                     f"{fmt(dp99, 3, True)} | {a['n']} | {a['errors']} |")
        L.append("")

    # translated lanes
    if tl_run:
        L.append("## Translated lanes, c=64 (median of repeats)")
        L.append("")
        L.append("direct = load generator → mock in the upstream's protocol (the body the gateway sends "
                 "upstream); switchyard = client protocol → gateway → mock. nginx cannot translate: "
                 "`× nginx CPU` is switchyard's CPU/request over nginx's on the plain OpenAI lane of "
                 "the same mode at c=64 in this run (the reference rows).")
        L.append("")
        L.append("| lane | target | req/s | spread | p50 ms | p99 ms | p99.9 ms | +p50 ms | +p99 ms | "
                 "CPU µs/req | × nginx CPU | peak RSS MiB | errors |")
        L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")

        def row(name, t, a, d, ratio):
            dp50 = a["p50"] - d["p50"] if d and a is not d else None
            dp99 = a["p99"] - d["p99"] if d and a is not d else None
            return (f"| {name} | {t} | {a['rps']:.0f} | ±{a['rps_spread'] / 2:.0f}% | "
                    f"{fmt(a['p50'], 3)} | {fmt(a['p99'], 3)} | {fmt(a['p999'], 3)} | "
                    f"{fmt(dp50, 3, True)} | {fmt(dp99, 3, True)} | {fmt(a['cpu'], 1)} | "
                    f"{'–' if ratio is None else f'{ratio:.2f}×'} | {fmt(a['hwm'], 1)} | {a['errors']} |")

        for mode, plain in TL_MODES.items():
            mlanes = [l for l in tl_run if l.startswith(mode + "-")]
            if not mlanes:
                continue
            n = nref.get(mode)
            if n:
                L.append(row(f"OpenAI passthrough {LANE_NAME[plain]} (reference)", "nginx", n, None, None))
            for lane in mlanes:
                d = tagg.get(("direct", lane))
                for t in ("direct", "switchyard"):
                    a = tagg.get((t, lane))
                    if not a:
                        continue
                    ratio = a["cpu"] / n["cpu"] if t == "switchyard" and n and n["cpu"] and a["cpu"] is not None else None
                    L.append(row(tl_name(lane), t, a, d, ratio))
        L.append("")

    ttl = {}
    for r in ttfb:
        if r.get("lane") and r.get("n"):
            ttl.setdefault((r["target"], r["lane"]), []).append(r)
    ttl = {k: {"p50": med(r["p50_ms"] for r in rs), "p99": med(r["p99_ms"] for r in rs),
               "n": sum(r["n"] for r in rs), "errors": sum(r.get("errors", 0) for r in rs)}
           for k, rs in ttl.items()}
    ttl_lanes = [l for l in tl_lanes if any((t, l) in ttl for t in ("direct", "switchyard"))]
    if ttl_lanes:
        L.append("## Translated streaming time to first SSE event, c=1 (median of repeats)")
        L.append("")
        L.append("| lane | target | TTFB p50 ms | TTFB p99 ms | +p50 ms | +p99 ms | requests | errors |")
        L.append("|---|---|--:|--:|--:|--:|--:|--:|")
        for lane in ttl_lanes:
            d = ttl.get(("direct", lane))
            for t in ("direct", "switchyard"):
                a = ttl.get((t, lane))
                if not a:
                    continue
                dp50 = a["p50"] - d["p50"] if d and t != "direct" else None
                dp99 = a["p99"] - d["p99"] if d and t != "direct" else None
                L.append(f"| {TL_SUB_NAME[lane.split('-', 1)[1]]} stream(20 chunks) | {t} | {a['p50']:.3f} | "
                         f"{a['p99']:.3f} | {fmt(dp50, 3, True)} | {fmt(dp99, 3, True)} | {a['n']} | {a['errors']} |")
        L.append("")

    if cl_run:
        L.append("## Cloud lanes: OpenAI door → Bedrock Converse / Vertex Gemini, c=64 (median of repeats)")
        L.append("")
        L.append("direct = load generator → mock with the request the gateway sends upstream (Bedrock: "
                 "SigV4-signed before each run, one signature replayed for the run; Vertex: a bearer token "
                 "minted once); nginx = the same through nginx; switchyard = an OpenAI chat request to the "
                 "gateway, which translates, signs each request (Bedrock) or adds its cached token (Vertex) "
                 "and decodes the event stream (ConverseStream). `× nginx plain` = CPU/request over "
                 "nginx's on the plain OpenAI lane of the same mode in this run (the reference rows, the "
                 f"target: switchyard ≤ {CL_CPU_LIMIT:g}×); `× nginx hop` = over nginx's on the same "
                 "cloud request; `mock µs/req` = the mock's own CPU per request (its SigV4 check, "
                 "event-stream encoding), the same upstream work for every target.")
        L.append("")
        L.append("| lane | target | req/s | spread | p50 ms | p99 ms | +p50 ms | +p99 ms | CPU µs/req | "
                 "× nginx plain | × nginx hop | mock µs/req | peak RSS MiB | errors |")
        L.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")

        def crow(name, t, a, d, plain_cpu, hop_cpu):
            dp50 = a["p50"] - d["p50"] if d and a is not d else None
            dp99 = a["p99"] - d["p99"] if d and a is not d else None
            x = lambda ref: "–" if not ref or a["cpu"] is None else f"{a['cpu'] / ref:.2f}×"
            return (f"| {name} | {t} | {a['rps']:.0f} | ±{a['rps_spread'] / 2:.0f}% | "
                    f"{fmt(a['p50'], 3)} | {fmt(a['p99'], 3)} | {fmt(dp50, 3, True)} | {fmt(dp99, 3, True)} | "
                    f"{fmt(a['cpu'], 1)} | {x(plain_cpu)} | {x(hop_cpu)} | {fmt(a.get('mock_cpu'), 1)} | "
                    f"{fmt(a['hwm'], 1)} | {a['errors']} |")

        for plain in ("c64", "s64"):
            mlanes = [l for l in cl_run if CL_REF[l] == plain]
            if not mlanes:
                continue
            ref = cref.get(plain, (None, {}))[0]
            if ref:
                L.append(crow(f"OpenAI passthrough {LANE_NAME[plain]} (reference)", "nginx", ref, None, None, None))
            for lane in mlanes:
                d = cagg.get(("direct", lane))
                n = cagg.get(("nginx", lane))
                for t in ("direct", "nginx", "switchyard"):
                    a = cagg.get((t, lane))
                    if not a:
                        continue
                    plain_cpu = ref["cpu"] if ref and t != "direct" else None
                    hop = n["cpu"] if n and t == "switchyard" else None
                    L.append(crow(CL_NAME[lane], t, a, d, plain_cpu, hop))
        L.append("")
        cloud = json.load(open(os.path.join(raw, "cloud.json"))) if os.path.exists(os.path.join(raw, "cloud.json")) else None
        if cloud:
            L.append(f"Mock counters over the whole run (`GET /mock/stats`): Vertex token endpoint "
                     f"**{cloud['gateway_token_requests']}** request(s) from the gateway in its "
                     f"{cloud['gateway_seconds']} s (token lifetime {cloud['token_lifetime_s']} s; "
                     f"{cloud['gateway_token_requests_before_runs']} before the first measured request, "
                     f"{cloud['token_requests_during_runs']} during the runs) plus "
                     f"{cloud['harness_token_requests']} by the harness (the direct baseline's token, before the "
                     f"gateway started); SigV4 verified **{cloud['sigv4_verified']}**, refused "
                     f"**{cloud['sigv4_rejected']}**; {cloud['mock_requests']} requests in all.")
            L.append("")

    idle = meta.get("idle_rss_mib")
    L.append(f"switchyard idle RSS right after startup (VmRSS): **{fmt(idle, 1)} MiB**")
    L.append("")

    # Targets
    checks = []

    def get(t, lane, k):
        a = agg.get((t, lane))
        return a[k] if a else None

    sc, nc = get("switchyard", "c64", "cpu"), get("nginx", "c64", "cpu")
    if sc is not None and nc:
        r = sc / nc
        checks.append(("CPU/request, non-stream c=64: switchyard ≤ 2× nginx",
                       f"{sc:.1f} / {nc:.1f} µs = {r:.2f}×", r <= 2.0))
    else:
        checks.append(("CPU/request, non-stream c=64: switchyard ≤ 2× nginx", "lane c64 not run", None))

    st, nt = get("switchyard", "c64", "rps"), get("nginx", "c64", "rps")
    if st is not None and nt:
        r = st / nt
        checks.append(("Throughput, non-stream c=64: switchyard ≥ 0.75× nginx",
                       f"{st:.0f} / {nt:.0f} req/s = {r:.2f}×", r >= 0.75))
    else:
        checks.append(("Throughput, non-stream c=64: switchyard ≥ 0.75× nginx", "lane c64 not run", None))

    d99, n99, s99 = get("direct", "c1", "p99"), get("nginx", "c1", "p99"), get("switchyard", "c1", "p99")
    if None not in (d99, n99, s99):
        sa, na = s99 - d99, n99 - d99
        # nginx's added p99 can be ~0 or negative in noise; guard the ratio.
        ok = sa <= 1.5 * max(na, 0.0) if na > 0 else sa <= 0
        ratio = f"{sa / na:.2f}×" if na > 0 else "n/a (nginx added ≤ 0)"
        checks.append(("Added p99, non-stream c=1: switchyard ≤ 1.5× nginx's",
                       f"{sa * 1000:+.0f} µs vs {na * 1000:+.0f} µs = {ratio}", ok))
    else:
        checks.append(("Added p99, non-stream c=1: switchyard ≤ 1.5× nginx's", "lane c1 not run", None))

    if "switchyard" in tt and "direct" in tt:
        delta = tt["switchyard"]["p50"] - tt["direct"]["p50"]
        checks.append(("Streaming TTFB c=1: switchyard within 1 ms of direct (p50)",
                       f"{tt['switchyard']['p50']:.3f} vs {tt['direct']['p50']:.3f} ms = {delta * 1000:+.0f} µs",
                       delta <= 1.0))
    else:
        checks.append(("Streaming TTFB c=1: switchyard within 1 ms of direct (p50)", "TTFB not run", None))

    if idle is not None:
        checks.append(("Idle RSS < 50 MiB", f"{idle:.1f} MiB", idle < 50))

    # translated lanes: one row per lane run (none at all when t64/ts64 were left out)
    for lane in tl_run:
        mode, plain = lane.split("-", 1)[0], TL_MODES[lane.split("-", 1)[0]]
        name = (f"Translation CPU/request, {tl_name(lane)}: switchyard ≤ {TL_CPU_LIMIT:g}× nginx's "
                f"(same mode, c=64, OpenAI lane)")
        s = tagg.get(("switchyard", lane))
        n = nref.get(mode)
        if s and s["cpu"] is not None and n and n["cpu"]:
            r = s["cpu"] / n["cpu"]
            checks.append((name, f"{s['cpu']:.1f} / {n['cpu']:.1f} µs = {r:.2f}×", r <= TL_CPU_LIMIT))
        else:
            checks.append((name, "no switchyard run" if not s else f"no nginx {plain} run", None))
    for lane in ttl_lanes:
        name = f"Streaming TTFB c=1, {TL_SUB_NAME[lane.split('-', 1)[1]]}: switchyard within 1 ms of direct (p50)"
        s, d = ttl.get(("switchyard", lane)), ttl.get(("direct", lane))
        if s and d:
            delta = s["p50"] - d["p50"]
            checks.append((name, f"{s['p50']:.3f} vs {d['p50']:.3f} ms = {delta * 1000:+.0f} µs", delta <= 1.0))
        else:
            checks.append((name, "TTFB run failed", None))

    # cloud lanes: switchyard's CPU/request against nginx's on the plain lane of the same mode
    for lane in cl_run:
        plain = CL_REF[lane]
        name = (f"Cloud CPU/request, {CL_NAME[lane]}: switchyard ≤ {CL_CPU_LIMIT:g}× nginx's "
                f"(plain OpenAI lane {plain}, same run)")
        s = cagg.get(("switchyard", lane))
        ref, per_rep = cref.get(plain, (None, {}))
        if s and s["cpu"] is not None and ref and ref["cpu"]:
            r = s["cpu"] / ref["cpu"]
            reps = [(x["rep"], x.get("cpu_us_per_req")) for x in runs if x["target"] == "switchyard" and x["lane"] == lane]
            each = ", ".join(f"{c / per_rep[k]:.2f}×" for k, c in sorted(reps) if c and per_rep.get(k))
            checks.append((name, f"{s['cpu']:.1f} / {ref['cpu']:.1f} µs = {r:.2f}× (per repeat {each})",
                           r <= CL_CPU_LIMIT))
        else:
            checks.append((name, "no switchyard run" if not s else f"no nginx {plain} run", None))
    cloud = json.load(open(os.path.join(raw, "cloud.json"))) if os.path.exists(os.path.join(raw, "cloud.json")) else None
    if cloud and any(l in cl_run for l in ("v64", "vs64")):
        vx = sum(x["ok"] for x in runs if x["target"] == "switchyard" and x["lane"] in ("v64", "vs64"))
        g, want = cloud["gateway_token_requests"], cloud["expected_gateway_token_requests"]
        checks.append(("Vertex: the mock's token endpoint is hit once per token lifetime, never on the request path",
                       f"{g} token request(s) from the gateway in {cloud['gateway_seconds']} s (expected {want} "
                       f"for a {cloud['token_lifetime_s']} s lifetime), {cloud['token_requests_during_runs']} during "
                       f"the runs' {vx} measured Vertex requests", g == want))
    if cloud and any(l in cl_run for l in ("b64", "bs64")):
        checks.append(("Bedrock: every SigV4 signature verified by the mock, none refused",
                       f"{cloud['sigv4_verified']} verified, {cloud['sigv4_rejected']} refused",
                       cloud["sigv4_rejected"] == 0 and cloud["sigv4_verified"] > 0))

    # the defaults lane: reported beside the plain one (no target of its own; the governed
    # lane's bound is the yardstick)
    def vs_plain(name, target, lane, limit):
        """`target`'s CPU per request over the plain gateway's in the same lane, against `limit`."""
        tc, pc = get(target, lane, "cpu"), get("switchyard", lane, "cpu")
        if tc is not None and pc:
            r = tc / pc
            checks.append((name, f"{tc:.1f} / {pc:.1f} µs = {r:.2f}×", r <= limit))
        else:
            checks.append((name, f"lane {lane} not run", None))

    vs_plain(f"Defaults (decision log + usage store) CPU/request, c=64: ≤ {GOV_CPU_LIMIT:g}× the plain lane's (same run)",
             "defaults", "d64", GOV_CPU_LIMIT)

    # governed lanes
    def load_json(name):
        path = os.path.join(raw, name)
        return json.load(open(path)) if os.path.exists(path) else None
    vs_plain(f"Governed CPU/request, c=64: ≤ {GOV_CPU_LIMIT:g}× the plain lane's (same run)",
             "governed", "g64", GOV_CPU_LIMIT)
    g99, p99 = get("governed", "g1", "p99"), get("switchyard", "g1", "p99")
    name = f"Governed added p99, c=1: within {GOV_P99_LIMIT_MS * 1000:.0f} µs of the plain lane's"
    if None not in (g99, p99):
        delta = g99 - p99
        checks.append((name, f"{g99:.3f} vs {p99:.3f} ms = {delta * 1000:+.0f} µs", delta <= GOV_P99_LIMIT_MS))
    else:
        checks.append((name, "lane g1 not run", None))
    cr, nr = get("cached", "h64", "rps"), get("nginx", "h64", "rps")
    name = f"Cache hits, non-stream c=64: throughput ≥ {CACHE_RPS_LIMIT:g}× nginx→mock's"
    if cr is not None and nr:
        r = cr / nr
        checks.append((name, f"{cr:.0f} / {nr:.0f} req/s = {r:.2f}×", r >= CACHE_RPS_LIMIT))
    else:
        checks.append((name, "lane h64 not run", None))
    cached = load_json("cached.json")
    if cached:
        # Misses: the first burst of a run at c=64 (up to 64 requests arrive before the first
        # answer is stored), and again each time the entry's TTL (5 min) runs out.
        total = cached["hits"] + cached["misses"]
        ratio = cached["hits"] / total if total else 0.0
        checks.append(("Cache hits: ≥ 99.9% of the lane's requests answered from the cache",
                       f"{cached['hits']} hits, {cached['misses']} misses = {ratio * 100:.3f}% "
                       f"({cached['entries']} entry)", ratio >= 0.999))
    vs_plain(f"Traced CPU/request, c=64 (100% sampled, exported): ≤ {TRACE_CPU_LIMIT:g}× the plain lane's (same run)",
             "traced", "o64", TRACE_CPU_LIMIT)
    traced = load_json("traced.json")
    if traced:
        # Three spans a request (request, route, attempt); the few requests the load generator
        # cuts at the end of a run (499, no attempt span) may have fewer.
        want = 3 * traced["requests"]
        checks.append(("Traced: the collector got every request's spans (request, route, attempt)",
                       f"{traced['spans']} spans in {traced['exports']} exports for {traced['requests']} requests "
                       f"({traced['dropped']} dropped)",
                       traced["spans"] >= 0.999 * want and traced["dropped"] == 0))
    vs_plain(f"Probing CPU/request, c=64 (20 idle deployments probed each second): ≤ {PROBE_CPU_LIMIT:g}× the plain lane's (same run)",
             "probed", "p64", PROBE_CPU_LIMIT)
    probed = load_json("probed.json")
    if probed:
        # One probe a second for each of the 20, from start-up to the end of the run (at most one
        # period late on each: the first probe is spread over the first period).
        want = 20 * (probed["seconds"] - 2)
        checks.append(("Probing: every idle deployment probed about once a second, all answered",
                       f"{probed['probes']} probes ({probed['ok']} ok) in {probed['seconds']} s for 20 deployments",
                       probed["probes"] >= 0.8 * want and probed["ok"] == probed["probes"]))
    vs_plain(f"Shadowing CPU/request, c=64 (5% of requests shadowed): ≤ {SHADOW_CPU_LIMIT:g}× the plain lane's (same run)",
             "shadowed", "sh64", SHADOW_CPU_LIMIT)
    for k in ("p50", "p99"):
        sv, pv = get("shadowed", "sh64", k), get("switchyard", "sh64", k)
        name = f"Shadowing {k}, c=64: the primary's within {SHADOW_LATENCY_LIMIT:g}× the plain lane's (same run)"
        if None not in (sv, pv) and pv:
            checks.append((name, f"{sv:.3f} / {pv:.3f} ms = {sv / pv:.2f}×", sv / pv <= SHADOW_LATENCY_LIMIT))
        else:
            checks.append((name, "lane sh64 not run", None))
    shadowed = load_json("shadowed.json")
    if shadowed:
        # 5% drawn per request: over thousands of requests, between 4% and 6%; none dropped.
        n, sent = shadowed["requests"], shadowed["shadows"] + shadowed["skipped"] + shadowed["dropped"]
        share = sent / n if n else 0.0
        checks.append(("Shadowing: about 5% of the requests shadowed, none dropped or failed",
                       f"{sent} of {n} = {share * 100:.2f}% ({shadowed['shadows']} sent, {shadowed['errors']} "
                       f"failed, {shadowed['skipped']} skipped, {shadowed['dropped']} dropped)",
                       0.04 <= share <= 0.06 and shadowed["dropped"] == 0 and shadowed["errors"] == 0))
    gov = load_json("governed.json")
    if gov:
        ok = gov["rows"] == gov["requests"] and gov["dropped"] == 0
        checks.append(("Governed: one usage row per request",
                       f"{gov['rows']} rows for {gov['requests']} requests (rollups count {gov['rollup_requests']}; "
                       f"{gov['dropped']} dropped)", ok))
    store = load_json("store.json")
    if store:
        rps = store["rows_per_s"]
        checks.append((f"Usage store: the SQLite writer sustains ≥ {STORE_ROWS_LIMIT} rows/s",
                       f"{store['written']} rows in {store['seconds']:.2f} s = {rps:.0f} rows/s",
                       rps >= STORE_ROWS_LIMIT and store["dropped"] == 0))

    L.append("## Targets")
    L.append("")
    L.append("| target | measured | result |")
    L.append("|---|---|---|")
    for name, val, ok in checks:
        res = "n/a" if ok is None else ("**PASS**" if ok else "**FAIL**")
        L.append(f"| {name} | {val} | {res} |")
    L.append("")
    L.append("Columns: `+p50`/`+p99` = target's median percentile minus direct's (added latency; c=1 sliced: pooled percentiles); "
             "`CPU µs/req` = proxy process utime+stime over the measured run / completed requests "
             "(nginx: master + workers); `peak RSS` = VmHWM at the end of the run after resetting it "
             "before the run (nginx: summed); `spread` = ±half the min–max range of req/s over repeats.")
    text = "\n".join(L) + "\n"
    with open(out, "w") as f:
        f.write(text)
    sys.stdout.write(text)


if __name__ == "__main__":
    main()
