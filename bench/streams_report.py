#!/usr/bin/env python3
"""Markdown report of bench/streams.sh: streams_report.py RAW_DIR OUT.md (also printed).

Reads from RAW_DIR: meta.json; ttfb.jsonl (one line per TTFB run) and its samples
ttfb-rROUND-PHASE-TARGET.txt (ms, one a line); snapshots.jsonl (per round: loaded-before,
loaded-after, closed); hold-rROUND.jsonl (streamhold's lines); rss-rROUND.txt (time, gateway
VmRSS, gateway VmHWM, mock VmRSS, holder VmRSS in KiB, every 0.25 s).
"""
import json
import os
import sys

GIB_KIB = 1024 * 1024
TARGET_MS = 2.0


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def mib(kib):
    return int(kib) / 1024.0


def ms(x):
    return "–" if x is None else f"{x:.3f}"


def signed(x):
    return "–" if x is None else f"{x:+.3f}"


def pct(sorted_ms, q):
    """Nearest-rank percentile, as bench/ttfb.py takes it."""
    if not sorted_ms:
        return None
    return sorted_ms[min(len(sorted_ms) - 1, int(round(q * (len(sorted_ms) - 1))))]


def samples(raw, rnd, phase, target):
    path = f"{raw}/ttfb-r{rnd}-{phase}-{target}.txt"
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [float(x) for x in f if x.strip()]


def main():
    raw, out = sys.argv[1], sys.argv[2]
    meta = json.load(open(f"{raw}/meta.json"))
    rounds = list(range(1, meta["rounds"] + 1))
    ttfb = {(r["round"], r["phase"], r["target"]): r for r in lines(f"{raw}/ttfb.jsonl")}
    snaps = {(int(s["round"]), s["name"]): s for s in lines(f"{raw}/snapshots.jsonl")}
    hz = os.sysconf("SC_CLK_TCK")
    want, tried = meta["streams_wanted"], meta["streams_tried"]

    per = []  # one dict per round
    for r in rounds:
        hold = lines(f"{raw}/hold-r{r}.jsonl")
        before = json.loads(snaps[(r, "loaded-before")]["hold"])
        after = json.loads(snaps[(r, "loaded-after")]["hold"])
        closed = snaps[(r, "closed")]
        rss = []
        with open(f"{raw}/rss-r{r}.txt") as f:
            for line in f:
                p = line.split()
                if len(p) == 5 and all(x.isdigit() for x in p[1:]):
                    rss.append([int(x) for x in p[1:]])
        s0, s1 = snaps[(r, "loaded-before")], snaps[(r, "loaded-after")]
        secs = float(s1["t"]) - float(s0["t"])
        cpu = {k: (int(s1[f"{k}_ticks"]) - int(s0[f"{k}_ticks"])) / hz / secs * 100.0
               for k in ("gw", "mock", "hold")}
        mb0, mt0 = map(int, s0["machine_ticks"].split())
        mb1, mt1 = map(int, s1["machine_ticks"].split())
        per.append({
            "round": r,
            "ramp": next((h for h in hold if h.get("event") == "ramped"), None),
            "summary": next((h for h in hold if h.get("event") == "summary"), hold[-1] if hold else {}),
            "before": before, "after": after, "closed": closed,
            "held": min(before.get("open", 0), after.get("open", 0)),
            # VmHWM was reset when the round's holder started: this round's peak.
            "hwm": int(closed["gw_hwm_kib"]),
            "peak_rss": max((x[0] for x in rss), default=0),
            "peak_mock": max((x[2] for x in rss), default=0),
            "peak_hold": max((x[3] for x in rss), default=0),
            "loaded_rss": int(s1["gw_rss_kib"]),
            "cpu": cpu, "machine_busy": 100.0 * (mb1 - mb0) / max(1, mt1 - mt0),
            "ncpu_window": secs,
        })
    held = min(p["held"] for p in per)
    hwm = max(p["hwm"] for p in per)

    L = ["# switchyard streaming-scale run\n"]
    L.append(f"{meta['when']}, git {meta['git']}, {meta['cpu']} × {meta['ncpu']}, kernel "
             f"{meta['kernel']}; pinning: {meta['pinning']}.\n")
    L.append(
        "One gateway (`bench/results/streams.yaml`: one OpenAI provider, decision log on, usage store "
        "off, a worker thread per core) in front of `switchyard mock`"
        + (", the provider speaking HTTPS and HTTP/2 as the real ones do: nginx terminates TLS (the "
           "test CA's `localhost` certificate, which the gateway trusts through `SSL_CERT_FILE`) and "
           "relays to the mock over HTTP/1.1, unbuffered, so up to 100 streams share one of the "
           "gateway's upstream connections" if meta.get("upstream") == "h2" else
           ", over plain HTTP/1.1: a connection per stream")
        + ". Each of the "
        f"{len(rounds)} rounds: TTFB on the idle gateway, then `streamhold` opens the streams "
        f"({meta['ramp_c']} being set up at a time), each a streaming request with "
        f"`\"mock\":{{\"chunks\":{meta['chunks']},\"chunk_delay_ms\":{meta['chunk_ms']}}}` (an event "
        f"every {meta['chunk_ms']} ms, ~{meta['stream_s']} s long) read as it comes; "
        f"{meta['settle_s']} s after the last one opened, TTFB again while they are open; then the "
        "holder lets go of them all. The provider's timeouts are "
        f"`stream_idle: {meta['idle_s']}s`, `total: {meta['total_s']}s`.\n")
    if meta["cap_note"]:
        L.append(f"**Cap:** {meta['cap_note']}.\n")

    L.append("## Streams\n")
    L.append(f"Asked for {want}, tried {tried} per round.\n")
    L.append("| round | ramp | open before / after loaded TTFB | with events after the first | "
             "closed by the other side | failed | gateway fds idle / loaded / closed | "
             "client→gw / gw→upstream conns |")
    L.append("|---|---|---|---|---|---|---|---|")
    for p in per:
        ramp, summ = p["ramp"], p["summary"]
        errs = summ.get("errors") or {}
        L.append(
            f"| {p['round']} | "
            + (f"{ramp['t_s']:.1f} s" if ramp else f"**not done in {meta['ramp_timeout']} s**")
            + f" | {p['before'].get('open')} / {p['after'].get('open')} | "
            f"{p['before'].get('flowing')} / {p['after'].get('flowing')} | {p['after'].get('ended')} | "
            f"{summ.get('failed', '–')}" + (" (" + ", ".join(f"{k}: {v}" for k, v in errs.items()) + ")" if errs else "")
            + f" | {meta['base_fds']} / {snaps[(p['round'], 'loaded-before')]['gw_fds']} / {p['closed']['gw_fds']} | "
            f"{snaps[(p['round'], 'loaded-before')]['client_conns']} / "
            f"{snaps[(p['round'], 'loaded-before')].get('upstream_conns', snaps[(p['round'], 'loaded-before')]['mock_conns'])} |")
    L.append(f"\nThe gateway's descriptor limit: {meta['fd_limit']}.\n")

    L.append("## Memory (gateway)\n")
    L.append(f"VmRSS at start {mib(meta['idle_rss_kib']):.1f} MiB, after the first idle TTFB runs "
             f"{mib(meta['idle2_rss_kib']):.1f} MiB.\n")
    L.append("| round | peak VmHWM | peak VmRSS (0.25 s samples) | VmRSS open | VmRSS after closing | "
             "(open − idle) / stream |")
    L.append("|---|---:|---:|---:|---:|---:|")
    for p in per:
        each = (p["loaded_rss"] - int(meta["idle2_rss_kib"])) / p["held"] if p["held"] else None
        L.append(f"| {p['round']} | {mib(p['hwm']):.1f} MiB | {mib(p['peak_rss']):.1f} MiB | "
                 f"{mib(p['loaded_rss']):.1f} MiB | {mib(p['closed']['gw_rss_kib']):.1f} MiB | "
                 + ("–" if each is None else f"{each:.1f} KiB") + " |")
    L.append(f"\nPeak VmRSS of the others: mock {mib(max(p['peak_mock'] for p in per)):.0f} MiB, "
             f"holder {mib(max(p['peak_hold'] for p in per)):.0f} MiB.\n")
    L.append("CPU while the streams were open (the loaded TTFB window; % of one core): "
             + "; ".join(f"r{p['round']}: gateway {p['cpu']['gw']:.0f}, mock {p['cpu']['mock']:.0f}, "
                         f"holder {p['cpu']['hold']:.0f}, machine busy {p['machine_busy']:.0f} % of all "
                         f"{meta['ncpu']} CPUs" for p in per) + ".\n")

    L.append(f"## TTFB of new streams\n\n{meta['ttfb_n']} sequential streaming requests (20 events, "
             "no delay) per target and run, over one keep-alive connection each (`bench/ttfb.py`), each "
             "timed from the request handed to the socket to the first byte of its first SSE event. "
             "idle = no held streams (the round's start), loaded = while they are open. `direct` is the "
             "mock itself (holding the same streams); `twin` is a second gateway, same config, that "
             "never holds a stream, measured in turns with `switchyard` (10 requests each, the order "
             "reversed every turn): while the streams are open it is the idle gateway *at the same "
             "moment*, on the same busy machine. `busy` = the whole machine's CPU use during the run "
             "(all CPUs; other work on this shared machine included).\n")
    pooled = {(ph, t): sorted(x for r in rounds for x in samples(raw, r, ph, t))
              for ph in ("idle", "loaded") for t in ("direct", "switchyard", "twin")}
    q = {(ph, t, k): pct(pooled[(ph, t)], v) for (ph, t) in pooled for k, v in (("p50", 0.5), ("p99", 0.99))}

    def diff(a, b):
        return None if a is None or b is None else a - b

    L.append("### Idle vs loaded, all rounds pooled\n")
    L.append("| target | idle p50 | idle p99 | loaded p50 | loaded p99 | Δp50 | Δp99 | samples idle / loaded |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    delta = {}
    for t in ("direct", "switchyard", "twin"):
        d = {k: diff(q[("loaded", t, k)], q[("idle", t, k)]) for k in ("p50", "p99")}
        delta[t] = d
        L.append(f"| {t} | {ms(q[('idle', t, 'p50')])} | {ms(q[('idle', t, 'p99')])} | "
                 f"{ms(q[('loaded', t, 'p50')])} | {ms(q[('loaded', t, 'p99')])} | {signed(d['p50'])} | "
                 f"{signed(d['p99'])} | {len(pooled[('idle', t)])} / {len(pooled[('loaded', t)])} |")
    L.append("\nms. `switchyard`'s row is the target's comparison as asked (the same gateway before and "
             "while it holds the streams); `twin`'s Δ is what the machine's state alone did to an idle "
             "gateway between the two phases.\n")
    L.append("### Same moment: switchyard vs its idle twin, all rounds pooled\n")
    L.append("| phase | switchyard p50 | switchyard p99 | twin p50 | twin p99 | switchyard − twin p50 | "
             "switchyard − twin p99 |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    twin = {}
    for ph in ("idle", "loaded"):
        d = {k: diff(q[(ph, "switchyard", k)], q[(ph, "twin", k)]) for k in ("p50", "p99")}
        twin[ph] = d
        L.append(f"| {ph} | {ms(q[(ph, 'switchyard', 'p50')])} | {ms(q[(ph, 'switchyard', 'p99')])} | "
                 f"{ms(q[(ph, 'twin', 'p50')])} | {ms(q[(ph, 'twin', 'p99')])} | {signed(d['p50'])} | "
                 f"{signed(d['p99'])} |")
    L.append("\nms. idle: both gateways idle, how far apart two identical instances measure; loaded: "
             "the gateway holding the streams against one that holds none, in the same seconds.\n")
    L.append("### Per round\n")
    L.append("| round | target | idle p50 | idle p99 | idle busy | loaded p50 | loaded p99 | loaded busy | "
             "Δp50 | Δp99 | errors idle / loaded |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rounds:
        for t in ("direct", "switchyard", "twin"):
            i, l_ = ttfb.get((r, "idle", t), {}), ttfb.get((r, "loaded", t), {})
            d = {k: (l_[k] - i[k]) if k in i and k in l_ else None for k in ("p50_ms", "p99_ms")}
            busy = lambda x: "–" if "machine_busy_pct" not in x else f"{x['machine_busy_pct']:.0f} %"  # noqa: E731
            L.append(f"| {r} | {t} | {ms(i.get('p50_ms'))} | {ms(i.get('p99_ms'))} | {busy(i)} | "
                     f"{ms(l_.get('p50_ms'))} | {ms(l_.get('p99_ms'))} | {busy(l_)} | {signed(d['p50_ms'])} | "
                     f"{signed(d['p99_ms'])} | {i.get('errors', '–')} / {l_.get('errors', '–')} |")
    L.append("")

    L.append("## Targets\n")
    L.append("| target | measured | result |\n|---|---|---|")
    verdict = lambda c: "PASS" if c else "FAIL"  # noqa: E731
    L.append(f"| {want} streams open at once | {held} (fewest of the rounds) | {verdict(held >= want)}"
             + (" (descriptor cap, see above)" if held < want and meta["cap_note"] else "") + " |")
    L.append(f"| gateway peak RSS < 1 GiB | {mib(hwm):.1f} MiB (VmHWM, highest round) | {verdict(hwm < GIB_KIB)} |")
    for k in ("p50", "p99"):
        d = delta["switchyard"][k]
        L.append(f"| loaded TTFB {k} within {TARGET_MS:g} ms of idle: before vs while holding (pooled) | "
                 f"{signed(d)} ms | {verdict(d is not None and d <= TARGET_MS)} |")
    for k in ("p50", "p99"):
        d = twin["loaded"][k]
        L.append(f"| loaded TTFB {k} within {TARGET_MS:g} ms of idle: vs the idle twin, same moment (pooled) | "
                 f"{signed(d)} ms | {verdict(d is not None and d <= TARGET_MS)} |")
    text = "\n".join(L) + "\n"
    with open(out, "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
