#!/usr/bin/env bash
# switchyard benchmark: direct vs nginx vs switchyard, in front of the mock provider,
# plus protocol-translating lanes (direct vs switchyard).
# See bench/README.md. One command:   bench/run.sh
# Knobs (env): DURATION (s, default 10), WARMUP (s, 2), REPEATS (3),
#   LANES ("c1 c64 c256 s64 t64 ts64 g1 g64 h64 o64 d64 p64"; opt-in: b64 bs64 v64 vs64, the cloud
#   lanes, and sh64, shadow traffic), TTFB_N (300 requests per TTFB run, 0 = skip),
#   C1_SLICES (5: the c=1 lane's DURATION runs as this many slices, targets taking turns),
#   PIN (1 = pin the load generator to the last CPU; 0 = no pinning),
#   SKIP_BUILD (1 = use the existing target/release/switchyard),
#   LOADGEN (oha | wrk; default oha, wrk used if oha cannot be installed),
#   MOCK_PORT 18081, NGINX_PORT 18082, GW_PORT 18080, ADMIN_PORT 19090,
#   GOV_PORT 18083, GOV_ADMIN_PORT 19091 (the governed gateway), STORE_ROWS (200000),
#   CACHE_PORT 18084, CACHE_ADMIN_PORT 19092 (the caching gateway, lane h64),
#   TRACE_PORT 18085, TRACE_ADMIN_PORT 19093, OTLP_PORT 14317 (+1: its counts) (the traced
#   gateway and its OTLP collector, lane o64), DEF_PORT 18086, DEF_ADMIN_PORT 19094 (the
#   gateway as a team runs it by default, lane d64), PROBE_PORT 18087, PROBE_ADMIN_PORT 19095
#   (the plain gateway plus 20 idle deployments probed every second, lane p64), SHADOW_PORT
#   18088, SHADOW_ADMIN_PORT 19096 (the plain gateway shadowing 5% of requests, lane sh64).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
REPEATS="${REPEATS:-3}"
C1_SLICES="${C1_SLICES:-5}"
LANES="${LANES:-c1 c64 c256 s64 t64 ts64 g1 g64 h64 o64 d64 p64}"
TTFB_N="${TTFB_N:-300}"
PIN="${PIN:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
LOADGEN="${LOADGEN:-oha}"
MOCK_PORT="${MOCK_PORT:-18081}"
NGINX_PORT="${NGINX_PORT:-18082}"
GW_PORT="${GW_PORT:-18080}"
ADMIN_PORT="${ADMIN_PORT:-19090}"
GOV_PORT="${GOV_PORT:-18083}"
GOV_ADMIN_PORT="${GOV_ADMIN_PORT:-19091}"
STORE_ROWS="${STORE_ROWS:-200000}"
CACHE_PORT="${CACHE_PORT:-18084}"
CACHE_ADMIN_PORT="${CACHE_ADMIN_PORT:-19092}"
TRACE_PORT="${TRACE_PORT:-18085}"
TRACE_ADMIN_PORT="${TRACE_ADMIN_PORT:-19093}"
DEF_PORT="${DEF_PORT:-18086}"
DEF_ADMIN_PORT="${DEF_ADMIN_PORT:-19094}"
PROBE_PORT="${PROBE_PORT:-18087}"
PROBE_ADMIN_PORT="${PROBE_ADMIN_PORT:-19095}"
SHADOW_PORT="${SHADOW_PORT:-18088}"
SHADOW_ADMIN_PORT="${SHADOW_ADMIN_PORT:-19096}"
OTLP_PORT="${OTLP_PORT:-14317}"
# The governed gateway's virtual key (a bench-only value, not a secret).
GOV_KEY="sy-bench-governed-key"

RES="$BENCH/results"
RAW="$RES/raw"
TOOLS="$BENCH/.tools"
BIN="$ROOT/target/release/switchyard"
NGX="$RES/nginx"

# Logs of the tool installs below land here before anything else runs (a
# fresh clone has no results folder yet).
mkdir -p "$RES"

LOG_TAG=bench
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

for l in $LANES; do
  case "$l" in c1|c64|c256|s64|t64|ts64|g1|g64|h64|o64|d64|p64|sh64|b64|bs64|v64|vs64) ;;
    *) die "unknown lane '$l' (known: c1 c64 c256 s64 t64 ts64 g1 g64 h64 o64 d64 p64 sh64 b64 bs64 v64 vs64)";; esac
done
[ "$REPEATS" -ge 1 ] || die "REPEATS must be >= 1"
[ "$C1_SLICES" -ge 1 ] || die "C1_SLICES must be >= 1"

# ---------------------------------------------------------------- tools
APT_UPDATED=0
apt_install() {
  command -v apt-get >/dev/null || die "apt-get not available; install $* by hand"
  if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"; apt-get update -qq >/dev/null; APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

command -v python3 >/dev/null || apt_install python3
find_nginx
OHA="$TOOLS/bin/oha"
if [ "$LOADGEN" = oha ] && [ ! -x "$OHA" ]; then
  log "installing oha into bench/.tools (cargo install --locked; a few minutes)"
  if ! cargo install --locked --root "$TOOLS" oha >"$RES/oha-install.log" 2>&1; then
    log "oha failed to build (see bench/results/oha-install.log); falling back to wrk"
    LOADGEN=wrk
  fi
fi
if [ "$LOADGEN" = wrk ] && ! command -v wrk >/dev/null; then apt_install wrk; fi

# ---------------------------------------------------------------- build
if [ "$SKIP_BUILD" != 1 ]; then
  command -v protoc >/dev/null || apt_install protobuf-compiler   # the etcd client's build compiles .proto files
  for attempt in 1 2 3; do
    log "cargo build --release -p switchyard (attempt $attempt)"
    if (cd "$ROOT" && cargo build --release -p switchyard --bin switchyard --example usage_writer --example otlp_sink >"$RES/build.log" 2>&1); then break; fi
    [ "$attempt" = 3 ] && die "build failed 3 times; see bench/results/build.log"
    log "build failed (maybe a crate is mid-edit); retrying in 60 s"; sleep 60
  done
fi
[ -x "$BIN" ] || die "$BIN missing"

# ---------------------------------------------------------------- setup
mkdir -p "$RES"
rm -rf "$RAW" "$NGX"
mkdir -p "$RAW"
ulimit -n 65535 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

NCPU="$(nproc)"
LG_CPU=$((NCPU - 1))
if [ "$PIN" = 1 ] && [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
  PINNER=(taskset -c "$LG_CPU"); PIN_DESC="load generator + ttfb.py pinned to CPU $LG_CPU (taskset); mock and proxies unpinned"
else
  PINNER=(); PIN_DESC="none"
fi

for p in "$MOCK_PORT" "$NGINX_PORT" "$GW_PORT" "$ADMIN_PORT" "$GOV_PORT" "$GOV_ADMIN_PORT" "$CACHE_PORT" "$CACHE_ADMIN_PORT" \
         "$TRACE_PORT" "$TRACE_ADMIN_PORT" "$OTLP_PORT" "$((OTLP_PORT + 1))" "$DEF_PORT" "$DEF_ADMIN_PORT" "$PROBE_PORT" "$PROBE_ADMIN_PORT" \
         "$SHADOW_PORT" "$SHADOW_ADMIN_PORT"; do
  port_busy "$p" && die "port $p on 127.0.0.1 is already in use"
done

BODY_NS='{"model":"chat","messages":[{"role":"user","content":"Hello"}]}'
BODY_S='{"model":"chat","messages":[{"role":"user","content":"Hello"}],"stream":true,"mock":{"chunks":20}}'
# The cache-hit lane's request: deterministic (temperature 0), so `when: deterministic` caches it.
BODY_DET='{"model":"chat","temperature":0,"messages":[{"role":"user","content":"Hello"}]}'

# Translated lanes (t64 = non-streaming, ts64 = streaming 20 chunks; both c=64). Each sub-lane has
# its own direct baseline: the mock called in the *upstream's* protocol with the body the gateway
# itself sends upstream for that client request (checked by capturing it), so direct vs switchyard
# differ only by the gateway and its translation. On translated lanes the mock field must travel
# inside provider_options (the gateway merges it into the upstream body).
TL_SUBS="oa2an oa2gm an2oa rs2oa"
AN_VER='anthropic-version: 2023-06-01'
TL_MSG='"messages":[{"role":"user","content":"Hello"}]'
TL_S_GW=',"stream":true,"provider_options":{"mock":{"chunks":20}}'
# tl_spec LANE SUB TARGET -> sets T_PORT T_PATH T_BODY T_HDR (one extra header or "") and
# T_KIND (protocol the answer is in: openai | anthropic | gemini)
tl_spec() {
  local lane=$1 sub=$2 target=$3 s=0
  [ "$lane" = ts64 ] && s=1
  T_HDR=""
  if [ "$target" = direct ]; then
    T_PORT=$MOCK_PORT
    case "$sub" in
      oa2an) T_KIND=anthropic; T_PATH=/v1/messages; T_HDR=$AN_VER
             T_BODY='{"model":"claude-sonnet-4-5","max_tokens":1024,'"$TL_MSG"
             [ "$s" = 1 ] && T_BODY+=',"stream":true,"mock":{"chunks":20}'
             T_BODY+='}';;
      oa2gm) T_KIND=gemini
             if [ "$s" = 1 ]; then
               T_PATH='/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'
               T_BODY='{"contents":[{"role":"user","parts":[{"text":"Hello"}]}],"mock":{"chunks":20}}'
             else
               T_PATH='/v1beta/models/gemini-2.5-flash:generateContent'
               T_BODY='{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]}'
             fi;;
      an2oa) T_KIND=openai; T_PATH=/v1/chat/completions
             T_BODY='{"model":"gpt-4o-mini",'"$TL_MSG"',"max_completion_tokens":1024'
             [ "$s" = 1 ] && T_BODY+=',"stream":true,"stream_options":{"include_usage":true},"mock":{"chunks":20}'
             T_BODY+='}';;
      rs2oa) T_KIND=openai; T_PATH=/v1/chat/completions
             T_BODY='{"model":"gpt-4o-mini",'"$TL_MSG"
             [ "$s" = 1 ] && T_BODY+=',"stream":true,"stream_options":{"include_usage":true},"mock":{"chunks":20}'
             T_BODY+='}';;
    esac
  else
    T_PORT=$GW_PORT
    case "$sub" in
      oa2an) T_KIND=openai; T_PATH=/v1/chat/completions; T_BODY='{"model":"mock-an/claude",'"$TL_MSG";;
      oa2gm) T_KIND=openai; T_PATH=/v1/chat/completions; T_BODY='{"model":"mock-gm/gemini",'"$TL_MSG";;
      an2oa) T_KIND=anthropic; T_PATH=/v1/messages; T_HDR=$AN_VER
             T_BODY='{"model":"mock/gpt-4o-mini","max_tokens":1024,'"$TL_MSG";;
      # store:false: a benchmark client keeps no conversation (nothing to
      # evict from the response store while measuring the translation).
      rs2oa) T_KIND=responses; T_PATH=/v1/responses
             T_BODY='{"model":"mock/gpt-4o-mini","input":"Hello","store":false';;
    esac
    [ "$s" = 1 ] && T_BODY+="$TL_S_GW"
    T_BODY+='}'
  fi
}
has_lane() { [[ " $LANES " == *" $1 "* ]]; }

# Cloud lanes (opt-in; c=64, the OpenAI door): b64 = Bedrock Converse, bs64 = ConverseStream
# (20 chunks), v64 = Vertex Gemini generateContent, vs64 = streamGenerateContent (20 chunks).
# Targets direct -> nginx -> switchyard. direct and nginx send the request the gateway itself
# sends upstream (path, body, the headers it signs; captured once and copied), authenticated as
# a client calling the cloud itself would be: Bedrock signed with SigV4 by bench/cloud_auth.py
# for the target's host, at the current time, again right before every load run (the mock
# refuses an X-Amz-Date more than 5 minutes off; one signature is replayed for the whole run,
# so the client's signing cost is not in the load generator's loop); Vertex with a bearer token
# the harness minted once from the same service account before the gateway started. nginx has
# a `location /model/` that passes Host through (SigV4 signs it). The gateway's own providers:
# mock-br (Converse), mock-brs (the same with `options: {mock: {chunks: 20}}`: a Converse body
# carries no client provider_options), mock-vx (Vertex, token_uri at the mock).
CL_LANES="b64 bs64 v64 vs64"
BR_MODEL="anthropic.claude-sonnet-4-5-20250929-v1:0"
BR_PATH="/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0"
VX_PATH="/v1/projects/bench-project/locations/us-east5/publishers/google/models/gemini-2.5-flash"
# The AWS documentation's example key pair, which the mock verifies against (not a secret).
BR_AKID="AKIDEXAMPLE"
BR_SECRET="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
VX_TOKEN=""
CL_ON=0
for l in $CL_LANES; do has_lane "$l" && CL_ON=1; done
# cl_spec LANE TARGET -> T_PORT T_PATH T_BODY T_HDR (headers, one a line, besides content-type)
# and T_KIND (protocol the answer is in: openai | converse | gemini). Signs Bedrock requests
# now: call it right before the run that uses them.
cl_spec() {
  local lane=$1 target=$2 s=0 accept=application/json
  case "$lane" in bs64|vs64) s=1; accept=text/event-stream;; esac
  T_HDR=""
  if [ "$target" = switchyard ]; then
    T_PORT=$GW_PORT; T_KIND=openai; T_PATH=/v1/chat/completions
    case "$lane" in
      b64) T_BODY='{"model":"mock-br/claude",'"$TL_MSG"'}';;
      bs64) T_BODY='{"model":"mock-brs/claude",'"$TL_MSG"',"stream":true}';;
      v64) T_BODY='{"model":"mock-vx/gemini",'"$TL_MSG"'}';;
      vs64) T_BODY='{"model":"mock-vx/gemini",'"$TL_MSG"',"stream":true,"provider_options":{"mock":{"chunks":20}}}';;
    esac
    return 0
  fi
  T_PORT=$MOCK_PORT; [ "$target" = nginx ] && T_PORT=$NGINX_PORT
  T_BODY='{"messages":[{"role":"user","content":[{"text":"Hello"}]}]'
  case "$lane" in
    b64|bs64)
      T_KIND=converse; T_PATH="$BR_PATH/converse"
      [ "$s" = 1 ] && { T_PATH="$BR_PATH/converse-stream"; T_BODY+=',"mock":{"chunks":20}'; }
      T_BODY+='}'
      T_HDR="accept: $accept"$'\n'"$(python3 "$BENCH/cloud_auth.py" sigv4 --host "127.0.0.1:$T_PORT" \
        --path "$T_PATH" --body "$T_BODY" --access-key "$BR_AKID" --secret-key "$BR_SECRET" \
        --header 'content-type: application/json' --header "accept: $accept")" \
        || die "cloud_auth.py sigv4 failed";;
    v64|vs64)
      T_KIND=gemini; T_BODY='{"contents":[{"role":"user","parts":[{"text":"Hello"}]}]'
      if [ "$s" = 1 ]; then T_PATH="$VX_PATH:streamGenerateContent?alt=sse"; T_BODY+=',"mock":{"chunks":20}'
      else T_PATH="$VX_PATH:generateContent"; fi
      T_BODY+='}'
      T_HDR="accept: $accept"$'\n'"authorization: Bearer $VX_TOKEN";;
  esac
}

# mock
"$BIN" mock --listen "127.0.0.1:$MOCK_PORT" >"$RAW/mock.log" 2>&1 &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
wait_port "$MOCK_PORT" "$MOCK_PID" mock

# nginx (own prefix, pid file, config; not the system service)
NGINX_WORKERS="${NGINX_WORKERS:-2}"
# The cloud lanes' Bedrock requests are SigV4-signed for the Host the client sent: pass it through.
NGX_CLOUD=""
if [ "$CL_ON" = 1 ]; then
  NGX_CLOUD='
        location /model/ {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host $http_host;
            proxy_buffering off;
        }'
fi
nginx_conf bench/run.sh "$NGINX_WORKERS" 8192 <<EOF
    upstream mock {
        server 127.0.0.1:$MOCK_PORT;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }$NGX_CLOUD
    }
}
EOF
cp "$NGX/nginx.conf" "$RES/nginx.conf"
start_nginx "$NGX" "$NGINX_PORT" "$RAW/nginx.log"

# switchyard
cat >"$RES/switchyard.yaml" <<EOF
# generated by bench/run.sh
server: { listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT }
providers:
  mock: { protocol: openai, base_url: http://127.0.0.1:$MOCK_PORT/v1 }
  mock-an: { protocol: anthropic, base_url: http://127.0.0.1:$MOCK_PORT }
  mock-gm: { protocol: gemini, base_url: http://127.0.0.1:$MOCK_PORT }
models:
  - { id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini, capabilities: [streaming] }
  - { id: mock-an/claude, provider: mock-an, model: claude-sonnet-4-5, max_output_tokens: 1024 }
  - { id: mock-gm/gemini, provider: mock-gm, model: gemini-2.5-flash }
routes:
  chat: { strategy: priority, targets: [mock/gpt-4o-mini] }
observability: { log_format: json, log_requests: true }
# The plain lanes measure the proxy: no usage store (the governed lanes have one).
usage: { store: off }
EOF
# The governed gateway: the same upstreams, and every request with a virtual
# key, a client budget and rpm/tpm limits (never reached), priced, and a row
# in the SQLite usage store.
rm -f "$RES/governed.db" "$RES/governed.db-wal" "$RES/governed.db-shm"
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$GOV_PORT, admin_listen: 127.0.0.1:$GOV_ADMIN_PORT/" \
    -e 's/model: gpt-4o-mini, capabilities: \[streaming\] }/model: gpt-4o-mini, capabilities: [streaming], pricing: { input: 0.15, output: 0.6 } }/' \
    -e "s|^usage: .*|usage: { store: sqlite, path: $RES/governed.db }|" \
    "$RES/switchyard.yaml" >"$RES/governed.yaml"
cat >>"$RES/governed.yaml" <<EOF
clients:
  - { id: bench, key_env: SWITCHYARD_BENCH_KEY, rpm: 100000000, tpm: 1000000000000, budget: { usd: 1000000000, per: month } }
EOF
grep -q "pricing:" "$RES/governed.yaml" || die "governed.yaml: the deployment was not priced"
# The caching gateway: the plain one with the memory response cache on.
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$CACHE_PORT, admin_listen: 127.0.0.1:$CACHE_ADMIN_PORT/" \
    "$RES/switchyard.yaml" >"$RES/cached.yaml"
echo "cache: { backend: memory, when: deterministic }" >>"$RES/cached.yaml"
# The traced gateway: the plain one exporting every request's spans (100% sampling) over
# OTLP/gRPC to a real collector (examples/otlp_sink: decodes and counts them).
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$TRACE_PORT, admin_listen: 127.0.0.1:$TRACE_ADMIN_PORT/" \
    -e "s|^observability: .*|observability: { log_format: json, log_requests: true, otlp_endpoint: \"http://127.0.0.1:$OTLP_PORT\", otlp_protocol: grpc, trace_sample: 1.0 }|" \
    "$RES/switchyard.yaml" >"$RES/traced.yaml"
grep -q "otlp_endpoint" "$RES/traced.yaml" || die "traced.yaml: no otlp_endpoint"
# The gateway as a team runs it by default: the plain one with the decision log on (as it is
# there) and the SQLite usage store on (a row per request), priced, no clients.
rm -f "$RES/defaults.db" "$RES/defaults.db-wal" "$RES/defaults.db-shm"
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$DEF_PORT, admin_listen: 127.0.0.1:$DEF_ADMIN_PORT/" \
    -e 's/model: gpt-4o-mini, capabilities: \[streaming\] }/model: gpt-4o-mini, capabilities: [streaming], pricing: { input: 0.15, output: 0.6 } }/' \
    -e "s|^usage: .*|usage: { store: sqlite, path: $RES/defaults.db }|" \
    "$RES/switchyard.yaml" >"$RES/defaults.yaml"
grep -q "defaults.db" "$RES/defaults.yaml" || die "defaults.yaml: no usage store"
# The probing gateway: the plain one plus 20 deployments no route sends to, each on a provider
# probed every second (a free model list): the prober's work, beside the same requests.
python3 - "$RES/switchyard.yaml" "$RES/probed.yaml" "$MOCK_PORT" "$PROBE_PORT" "$PROBE_ADMIN_PORT" \
  "$GW_PORT" "$ADMIN_PORT" <<'PY'
import sys
src, dst, mock, port, admin, gw_port, gw_admin = sys.argv[1:8]
out = []
for line in open(src).read().splitlines():
    out.append(line.replace(f"listen: 127.0.0.1:{gw_port}, admin_listen: 127.0.0.1:{gw_admin}",
                            f"listen: 127.0.0.1:{port}, admin_listen: 127.0.0.1:{admin}"))
    if line.startswith("  mock-gm:"):
        out += [f"  probed{i}: {{ protocol: openai, base_url: http://127.0.0.1:{mock}/v1, probe: {{ every: 1s }} }}"
                for i in range(20)]
    if line.startswith("  - { id: mock-gm/gemini,"):
        out += [f"  - {{ id: probed{i}/m, provider: probed{i}, model: gpt-4o-mini }}" for i in range(20)]
open(dst, "w").write("\n".join(out) + "\n")
PY
[ "$(grep -c "probe: { every: 1s }" "$RES/probed.yaml")" = 20 ] || die "probed.yaml: not 20 probed providers"
# The shadowing gateway: the plain one, its route also copying 5% of its requests, after each
# answer, to a second deployment on the same mock (lane sh64: the primary with shadow traffic on).
sed -e "s/listen: 127.0.0.1:$GW_PORT, admin_listen: 127.0.0.1:$ADMIN_PORT/listen: 127.0.0.1:$SHADOW_PORT, admin_listen: 127.0.0.1:$SHADOW_ADMIN_PORT/" \
    -e 's|^  - { id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini, capabilities: \[streaming\] }$|&\n  - { id: mock/shadow, provider: mock, model: gpt-4o-mini-shadow }|' \
    -e 's|^  chat: { strategy: priority, targets: \[mock/gpt-4o-mini\] }$|  chat: { strategy: priority, targets: [mock/gpt-4o-mini], shadow: { target: mock/shadow, share: 0.05 } }|' \
    "$RES/switchyard.yaml" >"$RES/shadowed.yaml"
grep -q "id: mock/shadow," "$RES/shadowed.yaml" && grep -q "shadow: { target: mock/shadow, share: 0.05 }" "$RES/shadowed.yaml" \
  || die "shadowed.yaml: no shadow deployment or no shadow on route chat"
# The cloud lanes' providers go into the plain gateway only (added after the configs above were
# derived from it, so no other gateway signs or fetches a token), and only when a cloud lane runs.
if [ "$CL_ON" = 1 ]; then
  command -v openssl >/dev/null || apt_install openssl   # cloud_auth.py's RS256 assertion
  # The test service account (google-auth's public test key) with its token_uri at the mock.
  python3 - "$ROOT/fixtures/providers/vertex/oauth/service_account.test.json" \
    "http://127.0.0.1:$MOCK_PORT/token" "$RES/vertex-sa.json" <<'PY'
import json, sys
sa = json.load(open(sys.argv[1]))
sa["token_uri"] = sys.argv[2]
json.dump(sa, open(sys.argv[3], "w"), indent=1)
PY
  python3 - "$RES/switchyard.yaml" "$MOCK_PORT" "$BR_MODEL" "$RES/vertex-sa.json" <<'PY'
import sys
path, port, model, sa = sys.argv[1:5]
br = f"protocol: bedrock, region: us-east-1, base_url: http://127.0.0.1:{port}, credentials: {{ env_prefix: BENCH_AWS }}"
add = {
    "  mock-gm:": [
        f"  mock-br: {{ {br} }}",
        f"  mock-brs: {{ {br}, options: {{ mock: {{ chunks: 20 }} }} }}",
        f"  mock-vx: {{ protocol: vertex, project: bench-project, location: us-east5, "
        f"base_url: http://127.0.0.1:{port}, credentials: {{ file: {sa} }} }}",
    ],
    "  - { id: mock-gm/gemini,": [
        f'  - {{ id: mock-br/claude, provider: mock-br, model: "{model}" }}',
        f'  - {{ id: mock-brs/claude, provider: mock-brs, model: "{model}", capabilities: [streaming] }}',
        "  - { id: mock-vx/gemini, provider: mock-vx, model: gemini-2.5-flash }",
    ],
}
out = []
for line in open(path).read().splitlines():
    out.append(line)
    for k, v in add.items():
        if line.startswith(k):
            out.extend(v)
open(path, "w").write("\n".join(out) + "\n")
PY
  grep -q "mock-vx/gemini" "$RES/switchyard.yaml" || die "switchyard.yaml: no cloud providers"
  export BENCH_AWS_ACCESS_KEY_ID="$BR_AKID" BENCH_AWS_SECRET_ACCESS_KEY="$BR_SECRET"
  # The direct baseline's Vertex token, minted before the gateway starts: the mock's token
  # requests from here on are the gateway's.
  VX_TOKEN="$(python3 "$BENCH/cloud_auth.py" vertex-token --sa "$RES/vertex-sa.json")" \
    || die "could not mint the direct baseline's Vertex token"
  curl -s "http://127.0.0.1:$MOCK_PORT/mock/stats" >"$RAW/mock-stats-harness.json"
  date +%s >"$RAW/cloud-gw-start"
fi
# The governed lane's client key (the others have no key_env).
export SWITCHYARD_BENCH_KEY="$GOV_KEY"
start_gateway switchyard "$RES/switchyard.yaml" "$ADMIN_PORT" "$GW_PORT"; SY_PID=$STARTED_PID
GOV_PID=""
if has_lane g1 || has_lane g64; then
  start_gateway governed "$RES/governed.yaml" "$GOV_ADMIN_PORT" "$GOV_PORT"; GOV_PID=$STARTED_PID
fi
TRACE_PID=""
if has_lane o64; then
  "$ROOT/target/release/examples/otlp_sink" "127.0.0.1:$OTLP_PORT" >"$RAW/otlp_sink.log" 2>&1 &
  OTLP_PID=$!; PIDS+=("$OTLP_PID")
  wait_port "$OTLP_PORT" "$OTLP_PID" otlp_sink
  start_gateway traced "$RES/traced.yaml" "$TRACE_ADMIN_PORT" "$TRACE_PORT"; TRACE_PID=$STARTED_PID
fi
PROBE_PID=""
if has_lane p64; then
  start_gateway probed "$RES/probed.yaml" "$PROBE_ADMIN_PORT" "$PROBE_PORT"; PROBE_PID=$STARTED_PID
fi
SHADOW_PID=""
if has_lane sh64; then
  start_gateway shadowed "$RES/shadowed.yaml" "$SHADOW_ADMIN_PORT" "$SHADOW_PORT"; SHADOW_PID=$STARTED_PID
fi
DEF_PID=""
if has_lane d64; then
  start_gateway defaults "$RES/defaults.yaml" "$DEF_ADMIN_PORT" "$DEF_PORT"; DEF_PID=$STARTED_PID
fi
CACHE_PID=""
if has_lane h64; then
  start_gateway cached "$RES/cached.yaml" "$CACHE_ADMIN_PORT" "$CACHE_PORT"; CACHE_PID=$STARTED_PID
fi
sleep 0.5
IDLE_RSS_KB="$(awk '/^VmRSS:/ {print $2}' "/proc/$SY_PID/status")"
log "switchyard up (pid $SY_PID), idle VmRSS ${IDLE_RSS_KB} KiB; nginx pid $NGINX_PID; mock pid $MOCK_PID"

# Smoke test every path once, both shapes, before measuring anything.
for port in "$MOCK_PORT" "$NGINX_PORT" "$GW_PORT"; do
  for body in "$BODY_NS" "$BODY_S"; do
    code="$(curl -s -o "$RAW/smoke.out" -w '%{http_code}' -H 'content-type: application/json' \
      -d "$body" "http://127.0.0.1:$port/v1/chat/completions")"
    [ "$code" = 200 ] || { cat "$RAW/smoke.out" >&2; die "smoke request to port $port answered $code"; }
  done
  n="$(grep -c '^data: {' "$RAW/smoke.out" || true)"
  [ "$n" -ge 20 ] || die "stream via port $port had $n data events (want >= 20: is the mock field forwarded?)"
done

if [ -n "$GOV_PID" ]; then
  code="$(curl -s -o "$RAW/smoke.out" -w '%{http_code}' -H 'content-type: application/json' \
    -d "$BODY_NS" "http://127.0.0.1:$GOV_PORT/v1/chat/completions")"
  [ "$code" = 401 ] || die "governed gateway without a key answered $code (want 401)"
  code="$(curl -s -D "$RAW/smoke.head" -o "$RAW/smoke.out" -w '%{http_code}' -H 'content-type: application/json' \
    -H "authorization: Bearer $GOV_KEY" -d "$BODY_NS" "http://127.0.0.1:$GOV_PORT/v1/chat/completions")"
  [ "$code" = 200 ] || { cat "$RAW/smoke.out" >&2; die "governed gateway answered $code"; }
  grep -qi '^x-switchyard-budget-remaining-usd:' "$RAW/smoke.head" || die "governed answer has no budget header"
  grep -qi '^x-ratelimit-remaining-requests:' "$RAW/smoke.head" || die "governed answer has no rate-limit headers"
  log "governed gateway: 401 without a key, 200 with budget and rate-limit headers"
fi

if [ -n "$CACHE_PID" ]; then
  for want in miss hit; do
    curl -s -D "$RAW/smoke.head" -o "$RAW/smoke.out" -H 'content-type: application/json' \
      -d "$BODY_DET" "http://127.0.0.1:$CACHE_PORT/v1/chat/completions"
    grep -qi "^x-switchyard-cache: $want" "$RAW/smoke.head" || die "caching gateway: expected a cache $want"
  done
  log "caching gateway: the deterministic request misses once, then hits"
fi

# Translated lanes: each request once (direct and through the gateway), checking status 200, the
# answer's shape in its protocol and, for streams, >= 20 content events and a proper ending
# (OpenAI "data: [DONE]", Anthropic "event: message_stop", Gemini last frame with finishReason).
check_req() { # NAME KIND STREAM(0/1) URL BODY [HEADERS, one a line]
  local name=$1 kind=$2 s=$3 url=$4 body=$5 hdr=${6:-} code h
  local args=(-s --max-time 10 -o "$RAW/smoke.out" -w '%{http_code}' -H 'content-type: application/json')
  while IFS= read -r h; do [ -n "$h" ] && args+=(-H "$h"); done <<<"$hdr"
  code="$(curl "${args[@]}" -d "$body" "$url" || true)"
  [ "$code" = 200 ] || { head -c 600 "$RAW/smoke.out" >&2; echo >&2; die "smoke $name: $url answered ${code:-nothing}"; }
  python3 - "$RAW/smoke.out" "$kind" "$s" <<'PY' || die "smoke $name: bad answer from $url (see bench/results/raw/smoke.out)"
import json, struct, sys, zlib
path, kind, stream = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
raw = open(path, "rb").read()
text = raw.decode("utf-8", "replace")
def fail(msg):
    print(f"  {msg}; answer starts: {text[:300]!r}", file=sys.stderr); sys.exit(1)
if kind == "converse" and stream:
    # application/vnd.amazon.eventstream: prelude (total, headers length, CRC), headers,
    # payload, message CRC; headers name-len, name, type, value (7 = string).
    frames, i = [], 0
    while i < len(raw):
        if len(raw) - i < 16:
            fail("truncated event-stream frame")
        total, hlen, pcrc = struct.unpack_from(">III", raw, i)
        frame = raw[i:i + total]
        if len(frame) != total or zlib.crc32(frame[:8]) != pcrc or \
                zlib.crc32(frame[:-4]) != struct.unpack(">I", frame[-4:])[0]:
            fail("bad event-stream frame (length or CRC)")
        hs, j = {}, 12
        while j < 12 + hlen:
            n = frame[j]; name = frame[j + 1:j + 1 + n].decode(); t = frame[j + 1 + n]; j += 2 + n
            size = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}.get(t)
            if size is None:
                size = struct.unpack_from(">H", frame, j)[0]; j += 2
            hs[name] = frame[j:j + size].decode("utf-8", "replace") if t == 7 else None; j += size
        frames.append((hs.get(":event-type"), json.loads(frame[12 + hlen:-4] or b"{}")))
        i += total
    frames or fail("no event-stream frames")
    n = sum(1 for e, p in frames if e == "contentBlockDelta" and p.get("delta", {}).get("text"))
    any(e == "messageStop" for e, _ in frames) or fail("no messageStop event")
    frames[-1][0] == "metadata" or fail("stream does not end with the metadata event")
    n >= 20 or fail(f"{n} content events (want >= 20: does the mock field reach the mock?)")
    sys.exit(0)
if not stream:
    j = json.loads(text)
    got = {"openai": lambda: j["choices"][0]["message"]["content"],
           "anthropic": lambda: j["content"][0]["text"],
           "responses": lambda: [p["text"] for i in j["output"] if i["type"] == "message" for p in i["content"]][0],
           "converse": lambda: j["output"]["message"]["content"][0]["text"],
           "gemini": lambda: j["candidates"][0]["content"]["parts"][0]["text"]}[kind]
    try:
        ok = bool(got())
    except (KeyError, IndexError, TypeError):
        ok = False
    ok or fail(f"not a {kind} non-streaming answer")
    sys.exit(0)
events = []  # (event name, data) per SSE event
for block in text.replace("\r\n", "\n").split("\n\n"):
    ev, data = None, []
    for ln in block.split("\n"):
        if ln.startswith("event:"): ev = ln[6:].strip()
        elif ln.startswith("data:"): data.append(ln[5:].strip())
    if ev or data: events.append((ev, "\n".join(data)))
events or fail("no SSE events")
if kind == "openai":
    n = sum(1 for _, d in events if d.startswith("{") and
            any(c.get("delta", {}).get("content") for c in json.loads(d).get("choices", [])))
    events[-1][1] == "[DONE]" or fail("stream does not end with data: [DONE]")
elif kind == "anthropic":
    n = sum(1 for e, _ in events if e == "content_block_delta")
    events[-1][0] == "message_stop" or fail("stream does not end with event: message_stop")
elif kind == "responses":
    n = sum(1 for e, _ in events if e == "response.output_text.delta")
    events[-1][0] == "response.completed" or fail("stream does not end with event: response.completed")
else:
    frames = [json.loads(d) for _, d in events if d.startswith("{")]
    n = sum(1 for f in frames if f.get("candidates", [{}])[0].get("content", {}).get("parts"))
    (frames and frames[-1]["candidates"][0].get("finishReason")) or fail("last frame has no finishReason")
n >= 20 or fail(f"{n} content events (want >= 20: does the mock field reach the mock?)")
PY
}
if has_lane t64 || has_lane ts64; then
  for lane in t64 ts64; do
    s=0; [ "$lane" = ts64 ] && s=1
    for sub in $TL_SUBS; do
      for target in direct switchyard; do
        tl_spec "$lane" "$sub" "$target"
        check_req "$lane-$sub/$target" "$T_KIND" "$s" "http://127.0.0.1:$T_PORT$T_PATH" "$T_BODY" "$T_HDR"
      done
    done
  done
  log "translated lanes: every request answered 200 with a complete answer"
fi
if [ "$CL_ON" = 1 ]; then
  for lane in $CL_LANES; do
    s=0; case "$lane" in bs64|vs64) s=1;; esac
    for target in direct nginx switchyard; do
      cl_spec "$lane" "$target"
      check_req "$lane/$target" "$T_KIND" "$s" "http://127.0.0.1:$T_PORT$T_PATH" "$T_BODY" "$T_HDR"
    done
  done
  log "cloud lanes: every request answered 200 with a complete answer (direct, nginx, switchyard)"
  curl -s "http://127.0.0.1:$MOCK_PORT/mock/stats" >"$RAW/mock-stats-start.json"
  log "mock before the runs: $(cat "$RAW/mock-stats-start.json")"
fi

# ---------------------------------------------------------------- measuring helpers
target_port() { case "$1" in direct) echo "$MOCK_PORT";; nginx) echo "$NGINX_PORT";; switchyard) echo "$GW_PORT";; governed) echo "$GOV_PORT";; cached) echo "$CACHE_PORT";; traced) echo "$TRACE_PORT";; defaults) echo "$DEF_PORT";; probed) echo "$PROBE_PORT";; shadowed) echo "$SHADOW_PORT";; esac; }
# The header a target's requests carry (the governed gateway's virtual key).
target_hdr() { case "$1" in governed) echo "authorization: Bearer $GOV_KEY";; *) echo "";; esac; }
# PIDs of the proxy under test (none for direct)
proxy_pids() {
  case "$1" in
    nginx) echo "$NGINX_PID" $(pgrep -P "$NGINX_PID" || true);;
    switchyard) echo "$SY_PID";;
    governed) echo "$GOV_PID";;
    cached) echo "$CACHE_PID";;
    traced) echo "$TRACE_PID";;
    defaults) echo "$DEF_PID";;
    probed) echo "$PROBE_PID";;
    shadowed) echo "$SHADOW_PID";;
  esac
}

lane_conc() { case "$1" in c1|g1) echo 1;; c64|s64|g64) echo 64;; c256) echo 256;; esac; }
lane_body() { case "$1" in s64) echo "$BODY_S";; *) echo "$BODY_NS";; esac; }

# loadgen URL CONC SECONDS BODY OUTFILE [HEADERS, one a line] -> normalized JSON on OUTFILE
loadgen() {
  local url=$1 conc=$2 secs=$3 body=$4 out=$5 hdr=${6:-} h
  local hargs=() hlist=()
  while IFS= read -r h; do [ -n "$h" ] && hlist+=("$h"); done <<<"$hdr"
  if [ "$LOADGEN" = oha ]; then
    for h in "${hlist[@]}"; do hargs+=(-H "$h"); done
    "${PINNER[@]}" "$OHA" --no-tui --output-format json -z "${secs}s" -c "$conc" -m POST \
      -H 'content-type: application/json' "${hargs[@]}" -d "$body" "$url" >"$out.raw" 2>"$out.err" || true
    python3 - "$out.raw" "$secs" >"$out" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
s, lp = j["summary"], j.get("latencyPercentiles", {})
codes = j.get("statusCodeDistribution", {})
ok = int(codes.get("200", 0))
total_codes = sum(int(v) for v in codes.values())
errs = sum(int(v) for v in j.get("errorDistribution", {}).values())
# requests cut off by the -z deadline are reported as errors by oha; they are not failures
cut = sum(int(v) for k, v in j.get("errorDistribution", {}).items() if "deadline" in k.lower())
ms = lambda v: None if v is None else v * 1000.0
dur = s.get("total") or float(sys.argv[2])
print(json.dumps({"ok": ok, "errors": (total_codes - ok) + (errs - cut), "rps": ok / dur,
                  "p50_ms": ms(lp.get("p50")), "p99_ms": ms(lp.get("p99")), "p999_ms": ms(lp.get("p99.9"))}))
PY
  else
    hargs=("${hlist[@]}")
    "${PINNER[@]}" wrk -t1 -c "$conc" -d "${secs}s" --timeout 10s -s "$BENCH/wrk.lua" "$url" -- "$body" "${hargs[@]}" \
      >"$out.raw" 2>"$out.err" || true
    python3 - "$out.raw" >"$out" <<'PY'
import json, sys
line = [l for l in open(sys.argv[1]) if l.startswith("WRKJSON ")][-1]
print(json.dumps(json.loads(line[len("WRKJSON "):])))
PY
  fi
}

# ---------------------------------------------------------------- meta
python3 - "$RAW/meta.json" <<PY
import json, platform, subprocess, sys, time
def sh(c):
    try: return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip() or subprocess.run(c, shell=True, capture_output=True, text=True).stderr.strip()
    except Exception: return "?"
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
lg = sh("'$OHA' --version") if "$LOADGEN" == "oha" else sh("wrk -v 2>&1 | head -1")
json.dump({
    "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "git": sh("cd '$ROOT' && git rev-parse --short HEAD") + (" (dirty tree)" if sh("cd '$ROOT' && git status --porcelain -- crates Cargo.toml Cargo.lock") else ""),
    "cpu": cpu, "ncpu": $NCPU, "kernel": platform.release(),
    "loadgen": lg, "pinning": "$PIN_DESC",
    "nginx": sh("'$NGINX_BIN' -v 2>&1"), "nginx_workers": "$NGINX_WORKERS",
    "duration": $DURATION, "warmup": $WARMUP, "repeats": $REPEATS,
    "c1_slices": $C1_SLICES if "$LOADGEN" == "oha" else None,
    "idle_rss_mib": $IDLE_RSS_KB / 1024.0,
}, open(sys.argv[1], "w"), indent=1)
PY

# ---------------------------------------------------------------- the runs
# measure TARGET LANE URL CONC BODY HEADER REP [REF]: warm-up, then one measured run -> runs.jsonl.
# REF=1 marks an nginx run of a plain OpenAI lane that is only there as the CPU reference of the
# translated and cloud lanes (its lane was not in LANES); report.py keeps it out of the load-lane table.
measure() {
  local target=$1 lane=$2 url=$3 conc=$4 body=$5 hdr=$6 rep=$7 ref=${8:-0}
  local tag="$target-$lane-r$rep" pids t0 t1 m0 m1 hwm
  [ "$ref" = 1 ] && tag="$tag-ref"
  if [ "$WARMUP" -gt 0 ]; then loadgen "$url" "$conc" "$WARMUP" "$body" "$RAW/$tag.warm.json" "$hdr"; fi
  pids="$(proxy_pids "$target")"
  # shellcheck disable=SC2086
  hwm_reset $pids
  # shellcheck disable=SC2086
  t0="$(cpu_ticks $pids)"; m0="$(cpu_ticks "$MOCK_PID")"
  loadgen "$url" "$conc" "$DURATION" "$body" "$RAW/$tag.json" "$hdr"
  # shellcheck disable=SC2086
  t1="$(cpu_ticks $pids)"; m1="$(cpu_ticks "$MOCK_PID")"
  # shellcheck disable=SC2086
  hwm="$(hwm_kib $pids)"
  python3 - "$RAW/$tag.json" "$target" "$lane" "$rep" "$((t1 - t0))" "$(getconf CLK_TCK)" "$hwm" "$pids" "$ref" \
    "$((m1 - m0))" >>"$RAW/runs.jsonl" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
target, lane, rep, ticks, hz, hwm, pids, ref, mticks = sys.argv[2:11]
r.update(target=target, lane=lane, rep=int(rep))
if ref == "1":
    r["ref"] = True
# the mock's own CPU per request (the same upstream work for every target of a lane)
r["mock_cpu_us_per_req"] = int(mticks) / int(hz) * 1e6 / r["ok"] if r["ok"] else None
if pids.strip():
    r["cpu_us_per_req"] = int(ticks) / int(hz) * 1e6 / r["ok"] if r["ok"] else None
    r["hwm_mib"] = int(hwm) / 1024.0
print(json.dumps(r))
PY
  log "$(tail -n1 "$RAW/runs.jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); c=r.get("cpu_us_per_req"); print("%-10s %-4s r%d: %8.0f req/s  p50 %.3f  p99 %.3f ms  cpu %s us/req  err %d%s" % (r["target"], r["lane"], r["rep"], r["rps"], r["p50_ms"] or -1, r["p99_ms"] or -1, "-" if c is None else "%.1f" % c, r["errors"], "  (reference)" if r.get("ref") else ""))')"
}
# The c=1 lane, sliced (oha only): its p99 is the tail of one request at a time, and this machine's
# noise comes in bursts of seconds that a single 10 s run per target catches or misses. So each
# repeat splits DURATION into C1_SLICES slices; the three targets take turns slice by slice (the
# order rotating), every request's latency is kept (oha's per-request CSV), and report.py takes the
# c=1 percentiles over all of a target's requests pooled. CPU ticks and peak RSS cover the slices.
measure_c1_sliced() { # REP LANE TARGET TARGET TARGET
  local rep=$1 lane=$2 slice_ms=$((DURATION * 1000 / C1_SLICES)) t s i pids n hdr
  local -A ticks=()
  local targets=("${@:3}")
  for t in "${targets[@]}"; do
    if [ "$WARMUP" -gt 0 ]; then
      loadgen "http://127.0.0.1:$(target_port "$t")/v1/chat/completions" 1 "$WARMUP" "$BODY_NS" \
        "$RAW/$t-$lane-r$rep.warm.json" "$(target_hdr "$t")"
    fi
    # shellcheck disable=SC2046
    hwm_reset $(proxy_pids "$t")
    ticks[$t]=0
  done
  for s in $(seq "$C1_SLICES"); do
    for i in 0 1 2; do
      t="${targets[$(((s + rep + i) % 3))]}"
      pids="$(proxy_pids "$t")"
      hdr=(); [ -n "$(target_hdr "$t")" ] && hdr=(-H "$(target_hdr "$t")")
      # shellcheck disable=SC2086
      n="$(cpu_ticks $pids)"
      "${PINNER[@]}" "$OHA" --no-tui --output-format csv -z "${slice_ms}ms" -c 1 -m POST \
        -H 'content-type: application/json' "${hdr[@]}" -d "$BODY_NS" \
        "http://127.0.0.1:$(target_port "$t")/v1/chat/completions" >"$RAW/$t-$lane-r$rep-s$s.csv" \
        2>"$RAW/$t-$lane-r$rep-s$s.err" || true
      [ -s "$RAW/$t-$lane-r$rep-s$s.err" ] || rm -f "$RAW/$t-$lane-r$rep-s$s.err"
      # shellcheck disable=SC2086
      ticks[$t]=$((ticks[$t] + $(cpu_ticks $pids) - n))
    done
  done
  for t in "${targets[@]}"; do
    pids="$(proxy_pids "$t")"
    # shellcheck disable=SC2086
    python3 - "$RAW" "$t" "$rep" "$C1_SLICES" "$slice_ms" "${ticks[$t]}" "$(getconf CLK_TCK)" \
      "$(hwm_kib $pids)" "$pids" "$lane" >>"$RAW/runs.jsonl" <<'PY'
import json, os, sys
raw, target, rep, slices, slice_ms, ticks, hz, hwm, pids, lane = sys.argv[1:11]
lat, errors = [], 0
for s in range(1, int(slices) + 1):
    path = os.path.join(raw, f"{target}-{lane}-r{rep}-s{s}.csv")
    with open(path) as f:
        next(f, None)  # request-start,DNS,DNS+dialup,Response-delay,request-duration,bytes,status
        for line in f:
            p = line.rstrip().split(",")
            if len(p) >= 7 and p[6] == "200":
                lat.append(float(p[4]) * 1000.0)
            elif len(p) >= 7:
                errors += 1
    os.remove(path)
# every latency is kept (µs) for report.py to pool over the repeats
with open(os.path.join(raw, f"lat-{lane}-{target}-r{rep}.txt"), "w") as f:
    f.write("\n".join(str(round(x * 1000)) for x in lat))
lat.sort()
pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
r = {"ok": len(lat), "errors": errors, "rps": len(lat) / (int(slices) * int(slice_ms) / 1000.0),
     "p50_ms": pct(0.5), "p99_ms": pct(0.99), "p999_ms": pct(0.999),
     "target": target, "lane": lane, "rep": int(rep), "slices": int(slices)}
if pids.strip():
    r["cpu_us_per_req"] = int(ticks) / int(hz) * 1e6 / r["ok"] if r["ok"] else None
    r["hwm_mib"] = int(hwm) / 1024.0
print(json.dumps(r))
PY
    log "$(tail -n1 "$RAW/runs.jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); c=r.get("cpu_us_per_req"); print("%-10s %-4s r%d: %8.0f req/s  p50 %.3f  p99 %.3f ms  cpu %s us/req  err %d  (%d slices)" % (r["target"], r["lane"], r["rep"], r["rps"], r["p50_ms"] or -1, r["p99_ms"] or -1, "-" if c is None else "%.1f" % c, r["errors"], r["slices"]))')"
  done
}
# ttfb_run TARGET LANE PORT PATH BODY HEADER REP -> ttfb.jsonl (LANE "" = the plain OpenAI TTFB run)
ttfb_run() {
  local target=$1 lane=$2 port=$3 path=$4 body=$5 hdr=$6 rep=$7 out
  local hargs=()
  [ -n "$hdr" ] && hargs=(--header "$hdr")
  out="$("${PINNER[@]}" python3 "$BENCH/ttfb.py" --port "$port" --path "$path" --n "$TTFB_N" "${hargs[@]}" \
    --body "$body" 2>>"$RAW/ttfb.err" || true)"
  [ -n "$out" ] || out='{"n":0}'
  python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(target=sys.argv[2], rep=int(sys.argv[3])); sys.argv[4] and r.update(lane=sys.argv[4]); print(json.dumps(r))' \
    "$out" "$target" "$rep" "$lane" >>"$RAW/ttfb.jsonl"
  log "ttfb $target${lane:+ $lane} r$rep: $out"
}

# The plain OpenAI lane whose nginx CPU/request is a translated or cloud lane's yardstick.
ref_lane() { case "$1" in t64|b64|v64) echo c64;; ts64|bs64|vs64) echo s64;; esac; }
# When that lane is not in LANES: one nginx-only run of it per repeat (before the first lane
# that needs it), logged as "(reference)".
declare -A REF_DONE=()
ref_run() { # PLAIN_LANE REP
  has_lane "$1" && return 0
  [ -n "${REF_DONE[$1-$2]:-}" ] && return 0
  REF_DONE[$1-$2]=1
  measure nginx "$1" "http://127.0.0.1:$NGINX_PORT/v1/chat/completions" 64 "$(lane_body "$1")" "" "$2" 1
}
NRUNS=0
REFS=""
for lane in $LANES; do
  case "$lane" in
    t64|ts64) NRUNS=$((NRUNS + 8));;
    g64|h64|o64|d64|p64|sh64) NRUNS=$((NRUNS + 2));;
    *) NRUNS=$((NRUNS + 3));;
  esac
  ref="$(ref_lane "$lane")"
  if [ -n "$ref" ] && ! has_lane "$ref" && [[ " $REFS " != *" $ref "* ]]; then
    REFS+=" $ref"; NRUNS=$((NRUNS + 1))
  fi
done
log "lanes: $LANES; $REPEATS repeats x $NRUNS runs x (${WARMUP}+${DURATION}) s ≈ $(( REPEATS * NRUNS * (WARMUP + DURATION) / 60 + 1 )) min"
for rep in $(seq "$REPEATS"); do
  for lane in $LANES; do
    case "$lane" in
      t64|ts64)
        # nginx's CPU/request on the plain OpenAI lane of the same mode is the yardstick.
        ref_run "$(ref_lane "$lane")" "$rep"
        for sub in $TL_SUBS; do
          for target in direct switchyard; do
            tl_spec "$lane" "$sub" "$target"
            measure "$target" "$lane-$sub" "http://127.0.0.1:$T_PORT$T_PATH" 64 "$T_BODY" "$T_HDR" "$rep"
          done
        done;;
      b64|bs64|v64|vs64)
        # OpenAI door -> Bedrock Converse / Vertex Gemini, against the same upstream request sent
        # directly and through nginx; the yardstick is nginx's plain lane of the same mode.
        ref_run "$(ref_lane "$lane")" "$rep"
        for target in direct nginx switchyard; do
          cl_spec "$lane" "$target"   # signs Bedrock requests now, for this run
          measure "$target" "$lane" "http://127.0.0.1:$T_PORT$T_PATH" 64 "$T_BODY" "$T_HDR" "$rep"
        done;;
      c1|g1)
          targets=(direct nginx switchyard); [ "$lane" = g1 ] && targets=(direct switchyard governed)
          if [ "$LOADGEN" = oha ]; then
            measure_c1_sliced "$rep" "$lane" "${targets[@]}"
          else
            for target in "${targets[@]}"; do
              measure "$target" "$lane" "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
                1 "$BODY_NS" "$(target_hdr "$target")" "$rep"
            done
          fi;;
      h64)
        # Every request a hit: the gateway answers from memory, no upstream call. Against
        # nginx→mock with the same body.
        for target in nginx cached; do
          measure "$target" h64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_DET" "" "$rep"
        done;;
      o64)
        # The same requests as the plain lane, each one traced and exported.
        for target in switchyard traced; do
          measure "$target" o64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_NS" "" "$rep"
        done;;
      d64)
        # The same requests as the plain lane, with a usage row each.
        for target in switchyard defaults; do
          measure "$target" d64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_NS" "" "$rep"
        done;;
      p64)
        # The same requests as the plain lane, while 20 idle deployments are probed each second.
        for target in switchyard probed; do
          measure "$target" p64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_NS" "" "$rep"
        done;;
      sh64)
        # The same requests as the plain lane, 5% of them also sent to the shadow deployment.
        for target in switchyard shadowed; do
          measure "$target" sh64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_NS" "" "$rep"
        done;;
      g64)
        for target in switchyard governed; do
          measure "$target" g64 "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            64 "$BODY_NS" "$(target_hdr "$target")" "$rep"
        done;;
      *)
        conc="$(lane_conc "$lane")"; body="$(lane_body "$lane")"
        for target in direct nginx switchyard; do
          measure "$target" "$lane" "http://127.0.0.1:$(target_port "$target")/v1/chat/completions" \
            "$conc" "$body" "" "$rep"
        done;;
    esac
  done
  if [ "$TTFB_N" -gt 0 ]; then
    for target in direct nginx switchyard; do
      ttfb_run "$target" "" "$(target_port "$target")" /v1/chat/completions "$BODY_S" "" "$rep"
    done
    if has_lane ts64; then
      for sub in $TL_SUBS; do
        for target in direct switchyard; do
          tl_spec ts64 "$sub" "$target"
          ttfb_run "$target" "ts64-$sub" "$T_PORT" "$T_PATH" "$T_BODY" "$T_HDR" "$rep"
        done
      done
    fi
  fi
done

# ---------------------------------------------------------------- governed: rows, store
if [ -n "$GOV_PID" ]; then
  # One usage row per request: what the governed gateway served vs what its
  # store holds, once the writer has caught up.
  python3 - "http://127.0.0.1:$GOV_ADMIN_PORT/metrics" "$RES/governed.db" >"$RAW/governed.json" <<'PY'
import json, sqlite3, sys, time, urllib.request
def metrics():
    text = urllib.request.urlopen(sys.argv[1]).read().decode()
    total = lambda name: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name))
    return (total("switchyard_requests_total{"), total('switchyard_usage_store_writes_total{result="ok"}'),
            total('switchyard_usage_store_writes_total{result="dropped"}'))
for _ in range(100):
    requests, ok, dropped = metrics()
    if ok + dropped >= requests:
        break
    time.sleep(0.1)
db = sqlite3.connect(sys.argv[2])
rows = db.execute("SELECT COUNT(*) FROM usage_requests").fetchone()[0]
days = db.execute("SELECT SUM(requests) FROM usage_daily").fetchone()[0] or 0
print(json.dumps({"requests": int(requests), "rows": rows, "rollup_requests": int(days),
                  "written": int(ok), "dropped": int(dropped)}))
PY
  log "governed: $(cat "$RAW/governed.json")"
fi
if [ -n "$CACHE_PID" ]; then
  # Every measured request was a hit: the upstream saw one miss per run of the gateway.
  python3 - "http://127.0.0.1:$CACHE_ADMIN_PORT/metrics" >"$RAW/cached.json" <<'PY'
import json, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
val = lambda name: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name))
print(json.dumps({"hits": int(val('switchyard_cache_requests_total{result="hit"}')),
                  "misses": int(val('switchyard_cache_requests_total{result="miss"}')),
                  "entries": int(val("switchyard_cache_entries"))}))
PY
  log "cached: $(cat "$RAW/cached.json")"
fi
if [ -n "$TRACE_PID" ]; then
  # What the collector got against what the gateway served and dropped (after its last batch).
  sleep 1
  python3 - "http://127.0.0.1:$TRACE_ADMIN_PORT/metrics" "http://127.0.0.1:$((OTLP_PORT + 1))/" >"$RAW/traced.json" <<'PY'
import json, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
total = lambda name: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(name))
got = json.loads(urllib.request.urlopen(sys.argv[2]).read())
print(json.dumps({"requests": int(total("switchyard_requests_total{")),
                  "dropped": int(total("switchyard_trace_spans_dropped_total")),
                  "spans": got["spans"], "exports": got["requests"]}))
PY
  log "traced: $(cat "$RAW/traced.json")"
fi
if [ -n "$PROBE_PID" ]; then
  # How many probes the probing gateway sent while it served, and how they went.
  python3 - "http://127.0.0.1:$PROBE_ADMIN_PORT/metrics" "$(( $(date +%s) - $(stat -c %Y "$RES/probed.yaml") ))" \
    >"$RAW/probed.json" <<'PY'
import json, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1]).read().decode()
total = lambda pre: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(pre))
print(json.dumps({"probes": int(total("switchyard_probes_total{")),
                  "ok": int(total("switchyard_probes_total{") - sum(
                      float(l.rsplit(" ", 1)[1]) for l in text.splitlines()
                      if l.startswith("switchyard_probes_total{") and 'result="ok"' not in l)),
                  "seconds": int(sys.argv[2])}))
PY
  log "probed: $(cat "$RAW/probed.json")"
fi
if [ -n "$SHADOW_PID" ]; then
  # The shadowing gateway's requests against the shadows it queued, sent, skipped and dropped
  # (after the last queued ones went out).
  sleep 1
  python3 - "http://127.0.0.1:$SHADOW_ADMIN_PORT" >"$RAW/shadowed.json" <<'PY'
import json, sys, urllib.request
base = sys.argv[1]
text = urllib.request.urlopen(base + "/metrics").read().decode()
total = lambda pre: sum(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(pre))
s = json.loads(urllib.request.urlopen(base + "/admin/shadow").read())
row = next((r for r in s["shadows"] if r["route"] == "chat"), {})
print(json.dumps({"requests": int(total("switchyard_requests_total{")),
                  "shadows": row.get("requests", 0), "errors": row.get("errors", 0),
                  "skipped": row.get("skipped", 0), "dropped": row.get("dropped", 0),
                  "queued": s.get("queued", 0),
                  "primary_p50_ms": row.get("primary_p50_ms"), "shadow_p50_ms": row.get("shadow_p50_ms")}))
PY
  log "shadowed: $(cat "$RAW/shadowed.json")"
fi
if [ "$CL_ON" = 1 ]; then
  # The mock's counters over the whole run: the Vertex token endpoint's requests (the harness's
  # one for the direct baseline, minted before the gateway started, then the gateway's) against
  # one per token lifetime, and the SigV4 checks (none may be refused).
  curl -s "http://127.0.0.1:$MOCK_PORT/mock/stats" >"$RAW/mock-stats-end.json"
  python3 - "$RAW" "$(cat "$RAW/cloud-gw-start")" "$(date +%s)" >"$RAW/cloud.json" <<'PY'
import json, os, sys
raw, started, ended = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
st = {k: json.load(open(os.path.join(raw, f"mock-stats-{k}.json"))) for k in ("harness", "start", "end")}
lifetime = 3599  # the mock's expires_in
# The gateway fetches the next token five minutes before the current one expires (half its
# lifetime when that is shorter): one at startup, then one per refresh period.
period = lifetime - 300 if lifetime - 300 >= lifetime / 2 else lifetime / 2
h = st["harness"]["token_requests"]
print(json.dumps({
    "harness_token_requests": h,
    "gateway_token_requests": st["end"]["token_requests"] - h,
    "gateway_token_requests_before_runs": st["start"]["token_requests"] - h,
    "token_requests_during_runs": st["end"]["token_requests"] - st["start"]["token_requests"],
    "tokens_issued": st["end"]["tokens_issued"],
    "gateway_seconds": ended - started, "token_lifetime_s": lifetime,
    "expected_gateway_token_requests": 1 + int((ended - started) // period),
    "sigv4_verified": st["end"]["sigv4_verified"], "sigv4_rejected": st["end"]["sigv4_rejected"],
    "mock_requests": st["end"]["requests"]}))
PY
  log "cloud: $(cat "$RAW/cloud.json")"
fi
STORE_BIN="$ROOT/target/release/examples/usage_writer"
if [ -x "$STORE_BIN" ] && [ "$STORE_ROWS" -gt 0 ]; then
  "$STORE_BIN" "$STORE_ROWS" "$RES/store-bench" >"$RAW/store.json" 2>"$RAW/store.err" \
    || die "the usage-writer benchmark failed (see raw/store.err)"
  log "usage store writer: $(cat "$RAW/store.json")"
fi

# ---------------------------------------------------------------- report
python3 "$BENCH/report.py" "$RAW" "$RES/latest.md"
cp "$RES/latest.md" "$RES/report-$(date +%Y%m%d-%H%M%S).md"
log "report written to bench/results/latest.md (raw data in bench/results/raw/)"
