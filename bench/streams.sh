#!/usr/bin/env bash
# switchyard streaming-scale run: one gateway holding STREAMS (10 000) slow SSE streams open at
# once. Reports its peak RSS and the TTFB of new streaming requests while they are open against
# the same on the idle gateway. See bench/README.md ("Streaming-scale run"). One command:
#   bench/streams.sh
# Knobs (env): STREAMS (10000), ROUNDS (3: idle TTFB, open the streams, loaded TTFB, close them;
#   the report pools the rounds), CHUNK_MS (2000: gap between a held stream's events),
#   STREAM_S (180: a held stream's length if nobody closes it), TTFB_N (1000 requests per TTFB
#   run), RAMP_C (256: streams being set up at once), RAMP_TIMEOUT (120 s), SETTLE_S (3 s between
#   the ramp's end and the loaded TTFB runs), FD_CAP (1: fewer streams than STREAMS if the
#   gateway's RLIMIT_NOFILE cannot hold them; 0: try STREAMS anyway),
#   PIN (1: holder + ttfb.py pinned to the last CPU), SKIP_BUILD (1: use the built binaries),
#   UPSTREAM (h2: the provider is HTTPS speaking HTTP/2, as the real ones are — nginx terminating
#   TLS with the test CA's certificate in front of the mock, the gateway trusting that CA through
#   SSL_CERT_FILE —, so a held stream costs the gateway one descriptor; h1: the mock over plain
#   HTTP/1.1, a connection per stream), FRONT_PORT 18283 (that nginx),
#   MOCK_PORT 18281, GW_PORT 18280, ADMIN_PORT 19290, TWIN_PORT 18282, TWIN_ADMIN_PORT 19291 (the
#   twin: the same gateway, never holding a stream, measured in turns with the loaded one).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
STREAMS="${STREAMS:-10000}"
CHUNK_MS="${CHUNK_MS:-2000}"
STREAM_S="${STREAM_S:-180}"
TTFB_N="${TTFB_N:-1000}"
ROUNDS="${ROUNDS:-3}"
SETTLE_S="${SETTLE_S:-3}"
RAMP_C="${RAMP_C:-256}"
RAMP_TIMEOUT="${RAMP_TIMEOUT:-120}"
FD_CAP="${FD_CAP:-1}"
PIN="${PIN:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
UPSTREAM="${UPSTREAM:-h2}"
FRONT_PORT="${FRONT_PORT:-18283}"
MOCK_PORT="${MOCK_PORT:-18281}"
GW_PORT="${GW_PORT:-18280}"
ADMIN_PORT="${ADMIN_PORT:-19290}"
TWIN_PORT="${TWIN_PORT:-18282}"
TWIN_ADMIN_PORT="${TWIN_ADMIN_PORT:-19291}"

RES="$BENCH/results"
RAW="$RES/streams"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/switchyard"
HOLD="$TARGET/release/streamhold"

mkdir -p "$RES"
LOG_TAG=streams
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

[ "$STREAMS" -ge 1 ] || die "STREAMS must be >= 1"
[ "$CHUNK_MS" -ge 1 ] || die "CHUNK_MS must be >= 1"
[ "$ROUNDS" -ge 1 ] || die "ROUNDS must be >= 1"
command -v python3 >/dev/null || die "python3 is needed (bench/ttfb.py, the report)"
case "$UPSTREAM" in h1|h2) ;; *) die "UPSTREAM must be h1 or h2";; esac
TLS_DIR="$ROOT/crates/switchyard/tests/data/tls"
if [ "$UPSTREAM" = h2 ]; then
  find_nginx
fi

# ---------------------------------------------------------------- build
if [ "$SKIP_BUILD" != 1 ]; then
  command -v protoc >/dev/null || apt_install protobuf-compiler   # the etcd client's build compiles .proto files
  log "cargo build --release -p switchyard -p switchyard-bench-probe"
  (cd "$ROOT" && cargo build --release -p switchyard --bin switchyard \
     -p switchyard-bench-probe --bin streamhold >"$RES/streams-build.log" 2>&1) \
    || die "build failed; see bench/results/streams-build.log"
fi
[ -x "$BIN" ] || die "$BIN missing"
[ -x "$HOLD" ] || die "$HOLD missing (cargo build --release -p switchyard-bench-probe)"

# ---------------------------------------------------------------- setup
rm -rf "$RAW"
mkdir -p "$RAW"
# Every process started from here inherits this: the gateway needs two descriptors per held
# stream (client + upstream), the mock and the holder one.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

NCPU="$(nproc)"
if [ "$PIN" = 1 ] && [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
  PINNER=(taskset -c "$((NCPU - 1))"); PIN_DESC="holder + ttfb.py pinned to CPU $((NCPU - 1)); mock and gateway unpinned"
else
  PINNER=(); PIN_DESC="none"
fi

for p in "$MOCK_PORT" "$GW_PORT" "$ADMIN_PORT" "$TWIN_PORT" "$TWIN_ADMIN_PORT" "$FRONT_PORT"; do
  port_busy "$p" && die "port $p on 127.0.0.1 is already in use"
done

# A held stream: CHUNKS events CHUNK_MS apart, so it lasts STREAM_S unless the holder lets go.
CHUNKS=$(( (STREAM_S * 1000 + CHUNK_MS - 1) / CHUNK_MS + 1 ))
BODY_SLOW='{"model":"chat","messages":[{"role":"user","content":"Hello"}],"stream":true,"mock":{"chunks":'"$CHUNKS"',"chunk_delay_ms":'"$CHUNK_MS"'}}'
# A measured stream: the run.sh TTFB request (20 events, no delay).
BODY_S='{"model":"chat","messages":[{"role":"user","content":"Hello"}],"stream":true,"mock":{"chunks":20}}'
# The gateway must not cut the held streams: stream_idle well above CHUNK_MS, total above STREAM_S.
IDLE_S=$(( CHUNK_MS / 1000 * 4 + 60 ))
TOTAL_S=$(( STREAM_S + RAMP_TIMEOUT + 300 ))

"$BIN" mock --listen "127.0.0.1:$MOCK_PORT" >"$RAW/mock.log" 2>&1 &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
wait_port "$MOCK_PORT" "$MOCK_PID" mock

# UPSTREAM=h2: nginx as the HTTPS/HTTP/2 provider the gateway talks to (TLS with the test CA's
# `localhost` certificate), relaying to the mock over HTTP/1.1 without buffering. It holds a
# connection to the mock per stream: its own descriptors, not the gateway's.
UPSTREAM_PORT="$MOCK_PORT"; BASE_URL="http://127.0.0.1:$MOCK_PORT/v1"; NGINX_PID=""
if [ "$UPSTREAM" = h2 ]; then
  NGX="$RAW/nginx"
  nginx_conf bench/streams.sh 2 16384 <<EOF
    upstream mock { server 127.0.0.1:$MOCK_PORT; keepalive 256; }
    server {
        listen 127.0.0.1:$FRONT_PORT ssl http2;
        ssl_certificate $TLS_DIR/server.pem;
        ssl_certificate_key $TLS_DIR/server.key;
        http2_max_concurrent_streams 128;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 600s;
        }
    }
}
EOF
  start_nginx "$NGX" "$FRONT_PORT" "$RAW/nginx.log"
  UPSTREAM_PORT="$FRONT_PORT"; BASE_URL="https://localhost:$FRONT_PORT/v1"
  export SSL_CERT_FILE="$TLS_DIR/ca.pem"
fi

# The plain gateway of bench/run.sh (results/switchyard.yaml), one OpenAI provider, with timeouts
# that leave slow streams alone, and room for the held streams' connections past the default
# server.max_connections (10 000) plus the TTFB runs'.
cat >"$RES/streams.yaml" <<EOF
# generated by bench/streams.sh
server: { listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT, max_connections: $((STREAMS + 1000)) }
providers:
  mock:
    protocol: openai
    base_url: $BASE_URL
    timeouts: { connect: 5s, first_byte: 30s, total: ${TOTAL_S}s, stream_idle: ${IDLE_S}s }
models:
  - { id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini, capabilities: [streaming] }
routes:
  chat: { strategy: priority, targets: [mock/gpt-4o-mini] }
observability: { log_format: json, log_requests: true }
usage: { store: off }
EOF
# The twin: the same gateway on other ports that never holds a stream. Its TTFB, taking turns
# with the loaded gateway's request by request block, is "the idle gateway at the same moment".
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$TWIN_PORT, admin_listen: 127.0.0.1:$TWIN_ADMIN_PORT/" \
  "$RES/streams.yaml" >"$RES/streams-twin.yaml"
grep -q "listen: 127.0.0.1:$TWIN_PORT" "$RES/streams-twin.yaml" || die "streams-twin.yaml: no twin listener"
start_gateway switchyard "$RES/streams.yaml" "$ADMIN_PORT" "$GW_PORT"; GW_PID=$STARTED_PID
start_gateway twin "$RES/streams-twin.yaml" "$TWIN_ADMIN_PORT" "$TWIN_PORT"; TWIN_PID=$STARTED_PID
sleep 0.5

status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
fds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# Established TCP connections with local port $1 (the server side of them).
estab() { ss -Htn state established "( sport = :$1 )" 2>/dev/null | wc -l; }
GW_LIMIT="$(awk '/^Max open files/ {print $5}' "/proc/$GW_PID/limits")"
IDLE_RSS_KB="$(status_kib "$GW_PID" VmRSS)"
log "gateway up (pid $GW_PID, RLIMIT_NOFILE $GW_LIMIT), idle VmRSS ${IDLE_RSS_KB} KiB; twin pid $TWIN_PID; mock pid $MOCK_PID"

# Smoke: a held stream's first event comes through (the first request also opens the upstream
# connection, over TLS with UPSTREAM=h2: a busy machine may take more than a second).
first="$(curl -sN --max-time 5 -H 'content-type: application/json' -d "$BODY_SLOW" \
  "http://127.0.0.1:$GW_PORT/v1/chat/completions" 2>/dev/null | head -c 200 || true)"
[[ "$first" == data:* ]] || die "a slow stream gave no first event through the gateway: '$first'"

# The machine's CPU ticks: "busy total" (all CPUs, from /proc/stat; busy = not idle, not iowait).
machine_ticks() { awk '/^cpu / {t=0; for (i=2; i<=NF; i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
ttfb() { # ROUND PHASE NAME=PORT [NAME=PORT] -> ttfb.jsonl, samples in ttfb-ROUND-PHASE-NAME.txt
  # Two targets take turns, 10 requests at a time (bench/ttfb.py --port … --port …).
  local rnd=$1 phase=$2 out m0 m1 t names=() args=()
  shift 2
  for t in "$@"; do
    names+=("${t%%=*}")
    args+=(--port "${t#*=}" --samples "$RAW/ttfb-r$rnd-$phase-${t%%=*}.txt")
  done
  m0="$(machine_ticks)"
  out="$("${PINNER[@]}" python3 "$BENCH/ttfb.py" "${args[@]}" --n "$TTFB_N" --body "$BODY_S" 2>>"$RAW/ttfb.err" || true)"
  m1="$(machine_ticks)"
  python3 - "$out" "$rnd" "$phase" "${names[*]}" $m0 $m1 >>"$RAW/ttfb.jsonl" <<'PY'
import json, sys
out, rnd, phase, names = sys.argv[1:5]
b0, t0, b1, t1 = map(int, sys.argv[5:9])
got = [json.loads(l) for l in out.splitlines() if l.strip()]
for i, name in enumerate(names.split()):
    r = got[i] if i < len(got) else {"n": 0}
    r.pop("port", None)
    r.update(round=int(rnd), phase=phase, target=name, machine_busy_pct=round(100.0 * (b1 - b0) / max(1, t1 - t0), 1))
    print(json.dumps(r))
PY
  for t in "${names[@]}"; do log "r$rnd ttfb $phase $t: $(grep "\"phase\": \"$phase\", \"target\": \"$t\"" "$RAW/ttfb.jsonl" | tail -n1)"; done
}
snapshot() { # ROUND NAME HOLD_PID -> one JSON line in snapshots.jsonl
  python3 -c 'import json,sys; k=sys.argv[1::2]; v=sys.argv[2::2]; print(json.dumps(dict(zip(k, v))))' \
    round "$1" name "$2" hold "$(tail -n1 "$RAW/hold-r$1.jsonl" 2>/dev/null || echo '{}')" \
    gw_fds "$(fds "$GW_PID")" gw_rss_kib "$(status_kib "$GW_PID" VmRSS)" gw_hwm_kib "$(status_kib "$GW_PID" VmHWM)" \
    client_conns "$(estab "$GW_PORT")" mock_conns "$(estab "$MOCK_PORT")" upstream_conns "$(estab "$UPSTREAM_PORT")" \
    mock_rss_kib "$(status_kib "$MOCK_PID" VmRSS)" hold_rss_kib "$(status_kib "$3" VmRSS)" \
    gw_ticks "$(cpu_ticks "$GW_PID")" mock_ticks "$(cpu_ticks "$MOCK_PID")" hold_ticks "$(cpu_ticks "$3")" \
    machine_ticks "$(machine_ticks)" t "$(date +%s.%N)" >>"$RAW/snapshots.jsonl"
  log "r$1 snapshot $2: $(tail -n1 "$RAW/snapshots.jsonl")"
}
# A process waited for is no longer the cleanup's to stop (its PID may be reused).
forget_pid() { local i; for i in "${!PIDS[@]}"; do [ "${PIDS[$i]}" != "$1" ] || unset 'PIDS[i]'; done; }
# RSS of the gateway (and the mock, the holder) every 0.25 s while streams are open:
# "time gw_VmRSS gw_VmHWM mock_VmRSS holder_VmRSS" (KiB).
sampler() {
  while :; do
    printf '%s %s %s %s %s\n' "$(date +%s.%N)" "$(status_kib "$GW_PID" VmRSS)" "$(status_kib "$GW_PID" VmHWM)" \
      "$(status_kib "$MOCK_PID" VmRSS)" "$(status_kib "$1" VmRSS)"
    sleep 0.25
  done
}

# The gateway holds a descriptor per stream for its client, and over HTTP/1.1 one more for its
# upstream connection (over HTTP/2 a connection carries up to 100 streams), plus what it holds
# idle (listeners, runtimes, pooled upstream connections) and HEADROOM for the loaded TTFB runs
# (their client and upstream connections) and the admin requests.
HEADROOM=16
if [ "$UPSTREAM" = h2 ]; then PER_STREAM=1; UP_CONNS=$(( STREAMS / 100 + 4 )); else PER_STREAM=2; UP_CONNS=0; fi
N="$STREAMS"; CAP_NOTE=""; BASE_FDS=""; IDLE2_RSS_KB=""
for round in $(seq "$ROUNDS"); do
  # ------------------------------------------------------------ idle
  ttfb "$round" idle "direct=$MOCK_PORT"
  ttfb "$round" idle "switchyard=$GW_PORT" "twin=$TWIN_PORT"
  sleep 0.5
  base="$(fds "$GW_PID")"
  if [ -z "$BASE_FDS" ]; then
    BASE_FDS="$base"; IDLE2_RSS_KB="$(status_kib "$GW_PID" VmRSS)"
    FIT=$(( (GW_LIMIT - BASE_FDS - HEADROOM - UP_CONNS) / PER_STREAM ))
    if [ "$STREAMS" -gt "$FIT" ]; then
      CAP_NOTE="the gateway's RLIMIT_NOFILE is $GW_LIMIT (hard limit $(ulimit -Hn), and raising it needs CAP_SYS_RESOURCE, which this machine does not give): $STREAMS streams need $PER_STREAM x $STREAMS descriptors ($([ "$PER_STREAM" = 2 ] && echo "client + upstream connection" || echo "the client's") ) plus $UP_CONNS upstream connections plus the $BASE_FDS it holds idle plus $HEADROOM for the measurements"
      if [ "$FD_CAP" = 1 ]; then
        N="$FIT"; CAP_NOTE="$CAP_NOTE, so $N streams were held (FD_CAP=1)"
      else
        CAP_NOTE="$CAP_NOTE; FD_CAP=0: $STREAMS tried anyway"
      fi
      log "cap: $CAP_NOTE"
    fi
  fi

  # ------------------------------------------------------------ hold
  # VmHWM from here on is this round's peak.
  hwm_reset "$GW_PID" "$MOCK_PID"
  "${PINNER[@]}" "$HOLD" --n "$N" --port "$GW_PORT" --body "$BODY_SLOW" --concurrency "$RAMP_C" \
    --secs "$STREAM_S" >"$RAW/hold-r$round.jsonl" 2>"$RAW/hold-r$round.err" &
  HOLD_PID=$!; PIDS+=("$HOLD_PID")
  sampler "$HOLD_PID" >"$RAW/rss-r$round.txt" &
  SAMPLER_PID=$!; PIDS+=("$SAMPLER_PID")
  for _ in $(seq $((RAMP_TIMEOUT * 10))); do
    grep -q '"event":"ramped"' "$RAW/hold-r$round.jsonl" 2>/dev/null && break
    kill -0 "$HOLD_PID" 2>/dev/null || die "the holder exited early (see $RAW/hold-r$round.err)"
    sleep 0.1
  done
  log "r$round ramp: $(grep '"event":"ramped"' "$RAW/hold-r$round.jsonl" || echo "not finished in $RAMP_TIMEOUT s")"
  # Let the ramp's churn settle: every held stream is past its first event.
  sleep "$SETTLE_S"
  snapshot "$round" loaded-before "$HOLD_PID"
  ttfb "$round" loaded "direct=$MOCK_PORT"
  ttfb "$round" loaded "switchyard=$GW_PORT" "twin=$TWIN_PORT"
  snapshot "$round" loaded-after "$HOLD_PID"

  # ------------------------------------------------------------ close
  kill -TERM "$HOLD_PID" 2>/dev/null || true
  wait "$HOLD_PID" 2>/dev/null || true
  forget_pid "$HOLD_PID"
  # Closed: the gateway is back to what it held idle, besides (HTTP/2) the upstream connections
  # it keeps pooled for the next streams.
  for _ in $(seq 100); do
    pooled=0; [ "$UPSTREAM" = h2 ] && pooled="$(estab "$UPSTREAM_PORT")"
    [ "$(fds "$GW_PID")" -le $((BASE_FDS + 8 + pooled)) ] && break
    sleep 0.1
  done
  sleep 1
  kill -TERM "$SAMPLER_PID" 2>/dev/null || true
  wait "$SAMPLER_PID" 2>/dev/null || true
  forget_pid "$SAMPLER_PID"
  snapshot "$round" closed "$HOLD_PID"
done

# ---------------------------------------------------------------- report
python3 - "$RAW/meta.json" <<PY
import json, platform, subprocess, sys, time
sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
json.dump({
    "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "git": sh("cd '$ROOT' && git rev-parse --short HEAD") + (" (dirty tree)" if sh("cd '$ROOT' && git status --porcelain -- crates bench/probe Cargo.toml Cargo.lock") else ""),
    "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"), "ncpu": $NCPU, "kernel": platform.release(),
    "pinning": "$PIN_DESC", "streams_wanted": $STREAMS, "streams_tried": $N, "cap_note": "$CAP_NOTE",
    "fd_limit": $GW_LIMIT, "base_fds": $BASE_FDS, "chunks": $CHUNKS, "chunk_ms": $CHUNK_MS,
    "stream_s": $STREAM_S, "idle_s": $IDLE_S, "total_s": $TOTAL_S, "ramp_c": $RAMP_C,
    "ramp_timeout": $RAMP_TIMEOUT, "ttfb_n": $TTFB_N, "rounds": $ROUNDS, "settle_s": $SETTLE_S,
    "idle_rss_kib": $IDLE_RSS_KB, "idle2_rss_kib": $IDLE2_RSS_KB, "upstream": "$UPSTREAM",
}, open(sys.argv[1], "w"), indent=1)
PY
python3 "$BENCH/streams_report.py" "$RAW" "$RES/streams.md"
log "report written to bench/results/streams.md (raw data in bench/results/streams/)"
