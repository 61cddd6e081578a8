#!/usr/bin/env bash
# switchyard fleet run: one gateway on the memory store (single) against three gateways sharing
# their limits through one redis-server, behind nginx (fleet), in one run, interleaved. Reports
# req/s and CPU per request (gateways + redis; nginx apart), Redis commands per request (INFO
# commandstats; EVALSHA per request = round trips before the upstream call) and how exactly a
# client's rpm limit holds across the fleet. See bench/README.md ("Fleet run"). One command:
#   bench/fleet.sh
# Knobs (env): DURATION (s, 10), WARMUP (s, 2), REPEATS (3: single, fleet, single, fleet, …;
#   medians reported), CONC (64), VARIANTS ("single fleet trio"; "trio" = nginx → three gateways
#   on the memory store, the floor's first half; diagnostic ones to add: "nginx1" = nginx → the
#   single gateway, "redis1" = one gateway on Redis (its own key prefix, a fleet of one),
#   direct), SCRIPT_P (8: the pipeline depth of the script-alone run), ACC_S (20 s: the
#   limit-accuracy burst, at most 50), ACC_RPM (600), ACC_C (64), ACC_VARIANTS ("fleet single":
#   single is the reference), MONITOR_S (3: a MONITOR sample through the fleet telling
#   script-internal commands from sent ones; 0 = skip), MONITOR_C (16: its
#   concurrency, low because MONITOR slows Redis down), FILL_S (62: seconds of a 2 req/s trickle
#   through the fleet before the measured runs, and on while they run, so every sliding window
#   holds its 10 buckets; the accuracy runs take place meanwhile), PIN (1: load generator on
#   the last CPU), SKIP_BUILD (1: use the built binary, from $CARGO_TARGET_DIR or target/),
#   NGINX_WORKERS (2), MOCK_PORT 18481, REDIS_PORT 16479, SINGLE_PORT 18480, SINGLE_ADMIN 19490,
#   FLEET_PORTS "18483 18484 18485", FLEET_ADMINS "19491 19492 19493", NGINX_PORT 18482 (→ fleet),
#   NGINX1_PORT 18486 (→ single), SOLO_PORT 18487, SOLO_ADMIN 19494 (redis1),
#   TRIO_PORTS "18488 18489 18490", TRIO_ADMINS "19495 19496 19497", NGINX3_PORT 18491 (→ trio).
set -euo pipefail

BENCH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$BENCH")"
DURATION="${DURATION:-10}"
WARMUP="${WARMUP:-2}"
REPEATS="${REPEATS:-3}"
CONC="${CONC:-64}"
VARIANTS="${VARIANTS:-single fleet trio}"
ACC_S="${ACC_S:-20}"
ACC_RPM="${ACC_RPM:-600}"
ACC_C="${ACC_C:-64}"
ACC_VARIANTS="${ACC_VARIANTS:-fleet single}"
MONITOR_S="${MONITOR_S:-3}"
SCRIPT_P="${SCRIPT_P:-8}"
MONITOR_C="${MONITOR_C:-16}"
FILL_S="${FILL_S:-62}"
PIN="${PIN:-1}"
SKIP_BUILD="${SKIP_BUILD:-0}"
NGINX_WORKERS="${NGINX_WORKERS:-2}"
MOCK_PORT="${MOCK_PORT:-18481}"
REDIS_PORT="${REDIS_PORT:-16479}"
SINGLE_PORT="${SINGLE_PORT:-18480}"
SINGLE_ADMIN="${SINGLE_ADMIN:-19490}"
read -r -a FLEET_PORTS <<<"${FLEET_PORTS:-18483 18484 18485}"
read -r -a FLEET_ADMINS <<<"${FLEET_ADMINS:-19491 19492 19493}"
NGINX_PORT="${NGINX_PORT:-18482}"
NGINX1_PORT="${NGINX1_PORT:-18486}"
SOLO_PORT="${SOLO_PORT:-18487}"
SOLO_ADMIN="${SOLO_ADMIN:-19494}"
read -r -a TRIO_PORTS <<<"${TRIO_PORTS:-18488 18489 18490}"
read -r -a TRIO_ADMINS <<<"${TRIO_ADMINS:-19495 19496 19497}"
NGINX3_PORT="${NGINX3_PORT:-18491}"
# Bench-only client keys (not secrets).
BENCH_KEY="sy-bench-fleet-key"
LIMITED_KEY="sy-bench-fleet-limited-key"
# Limits high enough never to refuse: the fleet has something to charge on Redis for every
# request (the client's rpm and tpm windows, the deployment's rpm and tpm windows).
HIGH_RPM=10000000
HIGH_TPM=10000000000

RES="$BENCH/results"
RAW="$RES/fleet"
TOOLS="$BENCH/.tools"
NGX="$RAW/nginx"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
BIN="$TARGET/release/switchyard"

mkdir -p "$RES"
LOG_TAG=fleet
# shellcheck source=bench/lib.sh
source "$BENCH/lib.sh"

[ "$REPEATS" -ge 1 ] || die "REPEATS must be >= 1"
[ "${#FLEET_PORTS[@]}" = 3 ] && [ "${#FLEET_ADMINS[@]}" = 3 ] || die "FLEET_PORTS and FLEET_ADMINS: three ports each"
[ "${#TRIO_PORTS[@]}" = 3 ] && [ "${#TRIO_ADMINS[@]}" = 3 ] || die "TRIO_PORTS and TRIO_ADMINS: three ports each"
# The client window slides in 10 buckets of 6 s: a burst of up to 54 s from a fresh start lies in
# one window, so what may be admitted in it is exactly the rpm.
[ "$ACC_S" -le 50 ] || die "ACC_S must be <= 50 (the admitted count is then simply ACC_RPM)"
for v in $VARIANTS; do case "$v" in single|fleet|nginx1|redis1|trio) ;; *) die "unknown variant '$v' (single fleet nginx1 redis1 trio)";; esac; done
has_variant() { [[ " $VARIANTS " == *" $1 "* ]]; }
for v in $ACC_VARIANTS; do case "$v" in single|fleet) ;; *) die "unknown ACC_VARIANTS entry '$v' (fleet single)";; esac; done
[ "$FILL_S" -ge 0 ] || die "FILL_S must be >= 0"
[[ " $VARIANTS " == *" single "* ]] && [[ " $VARIANTS " == *" fleet "* ]] || die "VARIANTS needs single and fleet"

# ---------------------------------------------------------------- tools
command -v python3 >/dev/null || apt_install python3
find_nginx
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || apt_install redis-server
command -v redis-benchmark >/dev/null || apt_install redis-tools
REDIS_BIN="$(command -v redis-server)"
install_oha || die "oha failed to build (see bench/results/oha-install.log)"
OHA="$TOOLS/bin/oha"

# ---------------------------------------------------------------- build
if [ "$SKIP_BUILD" != 1 ]; then
  command -v protoc >/dev/null || apt_install protobuf-compiler   # the etcd client's build compiles .proto files
  log "cargo build --release -p switchyard"
  (cd "$ROOT" && cargo build --release -p switchyard --bin switchyard >"$RES/fleet-build.log" 2>&1) \
    || die "build failed; see bench/results/fleet-build.log"
fi
[ -x "$BIN" ] || die "$BIN missing"

# ---------------------------------------------------------------- setup
rm -rf "$RAW"
mkdir -p "$RAW" "$RAW/redis"
ulimit -n 65535 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
HZ="$(getconf CLK_TCK)"

NCPU="$(nproc)"
if [ "$PIN" = 1 ] && [ "$NCPU" -ge 2 ] && command -v taskset >/dev/null; then
  PINNER=(taskset -c "$((NCPU - 1))"); PIN_DESC="load generator pinned to CPU $((NCPU - 1)) (taskset); the rest unpinned"
else
  PINNER=(); PIN_DESC="none"
fi

for p in "$MOCK_PORT" "$REDIS_PORT" "$SINGLE_PORT" "$SINGLE_ADMIN" "${FLEET_PORTS[@]}" "${FLEET_ADMINS[@]}" \
         "$NGINX_PORT" "$NGINX1_PORT" "$SOLO_PORT" "$SOLO_ADMIN" "${TRIO_PORTS[@]}" "${TRIO_ADMINS[@]}" "$NGINX3_PORT"; do
  port_busy "$p" && die "port $p on 127.0.0.1 is already in use"
done

BODY='{"model":"chat","messages":[{"role":"user","content":"Hello"}]}'
# The limit-accuracy client's route: a deployment without limits (only the client's rpm counts).
BODY_ACC='{"model":"free","messages":[{"role":"user","content":"Hello"}]}'

"$BIN" mock --listen "127.0.0.1:$MOCK_PORT" >"$RAW/mock.log" 2>&1 &
MOCK_PID=$!; PIDS+=("$MOCK_PID")
wait_port "$MOCK_PORT" "$MOCK_PID" mock

# redis-server: its own port and folder, persistence off, in the foreground (its PID is ours).
"$REDIS_BIN" --port "$REDIS_PORT" --bind 127.0.0.1 --save "" --appendonly no --daemonize no \
  --dir "$RAW/redis" --logfile "$RAW/redis.log" >/dev/null 2>&1 &
REDIS_PID=$!; PIDS+=("$REDIS_PID")
wait_port "$REDIS_PORT" "$REDIS_PID" redis
rcli() { redis-cli -h 127.0.0.1 -p "$REDIS_PORT" "$@"; }
[ "$(rcli ping)" = PONG ] || die "redis-server on $REDIS_PORT does not answer PING"

# The gateways: one config shape; the fleet's three add the state section.
gw_yaml() { # PORT ADMIN [STATE_LINE]
  cat <<EOF
# generated by bench/fleet.sh
server: { listen: 127.0.0.1:$1, admin_listen: 127.0.0.1:$2 }
providers:
  mock:
    protocol: openai
    base_url: http://127.0.0.1:$MOCK_PORT/v1
  free: { protocol: openai, base_url: http://127.0.0.1:$MOCK_PORT/v1 }
models:
  - { id: mock/gpt-4o-mini, provider: mock, model: gpt-4o-mini, limits: { rpm: $HIGH_RPM, tpm: $HIGH_TPM } }
  - { id: free/gpt-4o-mini, provider: free, model: gpt-4o-mini }
routes:
  chat: { strategy: priority, targets: [mock/gpt-4o-mini] }
  free: { strategy: priority, targets: [free/gpt-4o-mini] }
clients:
  - { id: bench, key_env: SWITCHYARD_BENCH_KEY, rpm: $HIGH_RPM, tpm: $HIGH_TPM }
  - { id: limited, key_env: SWITCHYARD_LIMITED_KEY, rpm: $ACC_RPM }
observability: { log_format: json, log_requests: true }
usage: { store: off }
${3:-}
EOF
}
STATE_LINE="state: { backend: redis, redis_url: \"redis://127.0.0.1:$REDIS_PORT/\", key_prefix: \"bench:\" }"
gw_yaml "$SINGLE_PORT" "$SINGLE_ADMIN" >"$RAW/single.yaml"
for i in 0 1 2; do gw_yaml "${FLEET_PORTS[$i]}" "${FLEET_ADMINS[$i]}" "$STATE_LINE" >"$RAW/fleet$i.yaml"; done
# redis1: a fleet of one on the same redis-server (its own keys), no load balancer.
gw_yaml "$SOLO_PORT" "$SOLO_ADMIN" "${STATE_LINE/bench:/bench1:}" >"$RAW/solo.yaml"
grep -q 'key_prefix: "bench1:"' "$RAW/solo.yaml" || die "solo.yaml: no bench1: prefix"
# trio: three gateways on the memory store, for the same spread of the load as the fleet's.
for i in 0 1 2; do gw_yaml "${TRIO_PORTS[$i]}" "${TRIO_ADMINS[$i]}" >"$RAW/trio$i.yaml"; done

# The clients' keys the gateways' configs name.
export SWITCHYARD_BENCH_KEY="$BENCH_KEY" SWITCHYARD_LIMITED_KEY="$LIMITED_KEY"
start_gateway single "$RAW/single.yaml" "$SINGLE_ADMIN" "$SINGLE_PORT"; SINGLE_PID=$STARTED_PID
FLEET_PIDS=()
for i in 0 1 2; do
  start_gateway "fleet$i" "$RAW/fleet$i.yaml" "${FLEET_ADMINS[$i]}" "${FLEET_PORTS[$i]}"
  FLEET_PIDS+=("$STARTED_PID")
done
SOLO_PID=""
if has_variant redis1; then start_gateway solo "$RAW/solo.yaml" "$SOLO_ADMIN" "$SOLO_PORT"; SOLO_PID=$STARTED_PID; fi
TRIO_PIDS=()
if has_variant trio; then
  for i in 0 1 2; do
    start_gateway "trio$i" "$RAW/trio$i.yaml" "${TRIO_ADMINS[$i]}" "${TRIO_PORTS[$i]}"
    TRIO_PIDS+=("$STARTED_PID")
  done
fi

# Every fleet instance on Redis and seeing the three (heartbeats, once a second).
fleet_joined() { # -> 0 when each instance says shared_state redis with 3 instances
  local a
  for a in "${FLEET_ADMINS[@]}"; do
    curl -s "http://127.0.0.1:$a/admin/state" | python3 -c '
import json, sys
s = json.load(sys.stdin)
sys.exit(0 if s.get("shared_state") == "redis" and len(s.get("instances") or []) == 3 else 1)' || return 1
  done
}
for _ in $(seq 100); do fleet_joined && break; sleep 0.1; done
fleet_joined || die "the fleet did not join on Redis within 10 s (see $RAW/fleet*.log)"

# nginx: round robin over the three (and, for the nginx1 variant, a second server to the single one).
nginx_conf bench/fleet.sh "$NGINX_WORKERS" 8192 <<EOF
    upstream fleet {
        server 127.0.0.1:${FLEET_PORTS[0]};
        server 127.0.0.1:${FLEET_PORTS[1]};
        server 127.0.0.1:${FLEET_PORTS[2]};
        keepalive 64;
        keepalive_requests 1000000;
    }
    upstream single {
        server 127.0.0.1:$SINGLE_PORT;
        keepalive 64;
        keepalive_requests 1000000;
    }
    upstream trio {
        server 127.0.0.1:${TRIO_PORTS[0]};
        server 127.0.0.1:${TRIO_PORTS[1]};
        server 127.0.0.1:${TRIO_PORTS[2]};
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location / {
            proxy_pass http://fleet;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
    server {
        listen 127.0.0.1:$NGINX1_PORT;
        location / {
            proxy_pass http://single;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
    server {
        listen 127.0.0.1:$NGINX3_PORT;
        location / {
            proxy_pass http://trio;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }
    }
}
EOF
start_nginx "$NGX" "$NGINX_PORT" "$RAW/nginx.log"
nginx_pids() { echo "$NGINX_PID" $(pgrep -P "$NGINX_PID" || true); }
log "up: mock $MOCK_PID, redis $REDIS_PID, single $SINGLE_PID, fleet ${FLEET_PIDS[*]}, nginx $(nginx_pids)${SOLO_PID:+, redis1 $SOLO_PID}${TRIO_PIDS[*]:+, trio ${TRIO_PIDS[*]}}"

# Smoke: 200 with the client's rate-limit headers, on the single gateway and on each instance via nginx.
smoke() { # PORT
  local code
  code="$(curl -s -D "$RAW/smoke.head" -o "$RAW/smoke.out" -w '%{http_code}' -H 'content-type: application/json' \
    -H "authorization: Bearer $BENCH_KEY" -d "$BODY" "http://127.0.0.1:$1/v1/chat/completions")"
  [ "$code" = 200 ] || { cat "$RAW/smoke.out" >&2; die "smoke request to port $1 answered $code"; }
  grep -qi '^x-ratelimit-remaining-requests:' "$RAW/smoke.head" || die "port $1: no x-ratelimit headers (client limits not applied?)"
}
smoke "$SINGLE_PORT"
for _ in 1 2 3 4 5 6; do smoke "$NGINX_PORT"; done
if has_variant nginx1; then smoke "$NGINX1_PORT"; fi
if has_variant redis1; then smoke "$SOLO_PORT"; fi
if has_variant trio; then for _ in 1 2 3 4 5 6; do smoke "$NGINX3_PORT"; done; fi
# The fleet charged its shared windows: the keys exist on Redis.
for k in bench:client:bench:rpm bench:client:bench:tpm bench:dep:mock/gpt-4o-mini:rpm bench:dep:mock/gpt-4o-mini:tpm; do
  [ "$(rcli exists "$k")" = 1 ] || die "Redis has no $k after the smoke requests: is the fleet charging its windows? (keys: $(rcli --scan --pattern 'bench:*' | tr '\n' ' '))"
done
log "smoke: 200 with rate-limit headers on every path; the fleet's windows are on Redis"

# ---------------------------------------------------------------- measuring helpers
# A process waited for is no longer the cleanup's to stop (its PID may be reused).
forget_pid() { local i; for i in "${!PIDS[@]}"; do [ "${PIDS[$i]}" != "$1" ] || unset 'PIDS[i]'; done; }
variant_url() {
  case "$1" in
    single) echo "http://127.0.0.1:$SINGLE_PORT/v1/chat/completions";;
    fleet) echo "http://127.0.0.1:$NGINX_PORT/v1/chat/completions";;
    nginx1) echo "http://127.0.0.1:$NGINX1_PORT/v1/chat/completions";;
    redis1) echo "http://127.0.0.1:$SOLO_PORT/v1/chat/completions";;
    trio) echo "http://127.0.0.1:$NGINX3_PORT/v1/chat/completions";;
  esac
}
variant_gw_pids() {
  case "$1" in
    fleet) echo "${FLEET_PIDS[*]}";;
    redis1) echo "$SOLO_PID";;
    trio) echo "${TRIO_PIDS[*]}";;
    *) echo "$SINGLE_PID";;
  esac
}
utime_ticks() { # sum utime (clock ticks) over pids: what of cpu_ticks is user time
  local t=0 pid f
  for pid in "$@"; do
    read -r -a f <<<"$(sed 's/^.*) //' "/proc/$pid/stat" 2>/dev/null)" || continue
    t=$((t + ${f[11]:-0}))   # field 14 of /proc/PID/stat
  done
  echo "$t"
}
machine_ticks() { awk '/^cpu / {t=0; for (i=2; i<=NF; i++) t+=$i; print t-$5-$6, t}' /proc/stat; }
redis_info() { rcli info all >"$1"; }
# Each fleet instance's switchyard_state_backend_errors_total{op} and shared_state, as JSON lines.
backend_errors() { # PHASE
  local i
  for i in 0 1 2; do
    python3 - "http://127.0.0.1:${FLEET_ADMINS[$i]}" "fleet$i" "$1" <<'PY' >>"$RAW/backend.jsonl"
import json, sys, urllib.request
base, name, phase = sys.argv[1:4]
text = urllib.request.urlopen(base + "/metrics").read().decode()
errs = {}
for l in text.splitlines():
    if l.startswith("switchyard_state_backend_errors_total{"):
        op = l.split('op="', 1)[1].split('"', 1)[0]
        errs[op] = errs.get(op, 0) + int(float(l.rsplit(" ", 1)[1]))
state = json.loads(urllib.request.urlopen(base + "/admin/state").read())
print(json.dumps({"phase": phase, "instance": name, "errors": errs, "shared_state": state.get("shared_state"),
                  "instances": len(state.get("instances") or [])}))
PY
  done
}

# run_oha URL CONC SECS BODY KEY OUT: oha's JSON in OUT
run_oha() {
  "${PINNER[@]}" "$OHA" --no-tui --output-format json -z "${3}s" -c "$2" -m POST \
    -H 'content-type: application/json' -H "authorization: Bearer $5" -d "$4" "$1" >"$6" 2>"$6.err" || true
  [ -s "$6.err" ] || rm -f "$6.err"
}

# measure VARIANT REP: warm-up, then a measured run with CPU ticks and Redis INFO around it -> runs.jsonl
measure() {
  local v=$1 rep=$2 tag="$1-r$2" url gw t0 t1 r0 r1 n0 n1 m0 m1 w0 w1 u0 u1 ru0 ru1 th0 th1 hl=0
  url="$(variant_url "$v")"; gw="$(variant_gw_pids "$v")"
  case "$v" in fleet|redis1) fill_signal STOP;; esac
  if [ "$WARMUP" -gt 0 ]; then run_oha "$url" "$CONC" "$WARMUP" "$BODY" "$BENCH_KEY" "$RAW/$tag.warm.json"; fi
  redis_info "$RAW/$tag.info0"
  # How many buckets the admission script reads per window.
  case "$v" in fleet) hl="$(rcli hlen bench:client:bench:tpm)";; redis1) hl="$(rcli hlen bench1:client:bench:tpm)";; esac
  # The gateways' threads: main (the admin runtime, which also carries the fleet's Redis
  # connection and tasks), the per-core workers, the rest.
  # shellcheck disable=SC2086
  th0="$(python3 "$BENCH/fleet_report.py" --threads $gw)"
  m0="$(machine_ticks)"; w0="$(date +%s.%N)"
  # shellcheck disable=SC2086
  t0="$(cpu_ticks $gw)"; r0="$(cpu_ticks "$REDIS_PID")"; n0="$(cpu_ticks $(nginx_pids))"
  # shellcheck disable=SC2086
  u0="$(utime_ticks $gw)"; ru0="$(utime_ticks "$REDIS_PID")"
  run_oha "$url" "$CONC" "$DURATION" "$BODY" "$BENCH_KEY" "$RAW/$tag.json"
  # shellcheck disable=SC2086
  t1="$(cpu_ticks $gw)"; r1="$(cpu_ticks "$REDIS_PID")"; n1="$(cpu_ticks $(nginx_pids))"
  # shellcheck disable=SC2086
  u1="$(utime_ticks $gw)"; ru1="$(utime_ticks "$REDIS_PID")"
  m1="$(machine_ticks)"; w1="$(date +%s.%N)"
  # shellcheck disable=SC2086
  th1="$(python3 "$BENCH/fleet_report.py" --threads $gw)"
  redis_info "$RAW/$tag.info1"
  fill_signal CONT
  python3 "$BENCH/fleet_report.py" --run "$RAW/$tag.json" "$v" "$rep" "$DURATION" "$HZ" \
    "$((t1 - t0))" "$((r1 - r0))" "$((n1 - n0))" "$RAW/$tag.info0" "$RAW/$tag.info1" "$w0" "$w1" $m0 $m1 "$((u1 - u0))" "$((ru1 - ru0))" "$th0" "$th1" "$hl" \
    >>"$RAW/runs.jsonl"
  # Did an instance fall back to its own state during the run (Redis slower than 50 ms)?
  backend_errors "$tag"
  log "$(tail -n1 "$RAW/runs.jsonl" | python3 -c 'import json,sys; r=json.loads(sys.stdin.read()); print("%-7s r%d: %7.0f req/s  p50 %.3f  p99 %.3f ms  cpu us/req: gw %.1f redis %.1f nginx %.1f  evalsha/req %.3f  redis cmds/req %.2f  err %d" % (r["variant"], r["rep"], r["rps"], r["p50_ms"] or -1, r["p99_ms"] or -1, r["cpu_gw_us"] or -1, r["cpu_redis_us"] or -1, r["cpu_nginx_us"] or -1, r["evalsha_per_req"] or 0, r["redis_cmds_per_req"] or 0, r["errors"]))')"
}

# ---------------------------------------------------------------- meta
python3 - "$RAW/meta.json" <<PY
import json, platform, subprocess, sys, time
sh = lambda c: subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
json.dump({
    "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "git": sh("cd '$ROOT' && git rev-parse --short HEAD") + (" (dirty tree)" if sh("cd '$ROOT' && git status --porcelain -- crates Cargo.toml Cargo.lock") else ""),
    "cpu": sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"), "ncpu": $NCPU, "kernel": platform.release(),
    "loadgen": sh("'$OHA' --version"), "pinning": "$PIN_DESC",
    "nginx": subprocess.run("'$NGINX_BIN' -v", shell=True, capture_output=True, text=True).stderr.strip(),
    "nginx_workers": $NGINX_WORKERS, "redis": sh("'$REDIS_BIN' --version"),
    "duration": $DURATION, "warmup": $WARMUP, "repeats": $REPEATS, "conc": $CONC, "variants": "$VARIANTS",
    "acc_s": $ACC_S, "acc_rpm": $ACC_RPM, "acc_c": $ACC_C, "acc_variants": "$ACC_VARIANTS",
    "monitor_s": $MONITOR_S, "monitor_c": $MONITOR_C, "fill_s": $FILL_S, "high_rpm": $HIGH_RPM, "high_tpm": $HIGH_TPM,
}, open(sys.argv[1], "w"), indent=1)
PY

# ---------------------------------------------------------------- filling the windows
# A sliding window is a hash of up to 10 live buckets (6 s each), and the admission script reads
# them all (HGETALL) on every request: from a fresh start the windows hold 1, 2, … buckets and
# the script costs less than it will once a minute of traffic has filled them. So a trickle
# (2 req/s) through every Redis variant fills each window for FILL_S (62) s before the measured
# runs, the limit-accuracy runs taking place meanwhile (another client, its own window), and
# keeps them full while the other variants are measured: it is paused (SIGSTOP) while a Redis
# variant is measured, whose own traffic then fills them, so no request of it is counted there.
# It stops before the MONITOR sample.
FILL_PIDS=()
for v in fleet redis1; do
  [ "$FILL_S" -gt 0 ] || break
  [ "$v" = fleet ] || has_variant "$v" || continue
  "${PINNER[@]}" "$OHA" --no-tui --output-format json -z 3600s -c 1 -q 2 -m POST \
    -H 'content-type: application/json' -H "authorization: Bearer $BENCH_KEY" -d "$BODY" \
    "$(variant_url "$v")" >"$RAW/fill-$v.json" 2>/dev/null &
  FILL_PIDS+=("$!"); PIDS+=("$!")
done
FILL_T0=$SECONDS
fill_signal() { local p; for p in "${FILL_PIDS[@]}"; do kill "-$1" "$p" 2>/dev/null || true; done; }

# ---------------------------------------------------------------- limit accuracy
# A client with rpm ACC_RPM on a deployment without limits, loaded far above it from a fresh start
# for ACC_S s: at most ACC_RPM may be admitted in that time (one sliding window), the rest 429.
acc_run() { # VARIANT
  local v=$1 url code w0 w1
  url="$(variant_url "$v")"
  if [ "$v" = fleet ]; then
    rcli del bench:client:limited:rpm bench:client:limited:tpm >/dev/null
    fleet_joined || log "WARNING: the fleet is not all on Redis before the accuracy run"
  fi
  redis_info "$RAW/acc-$v.info0"
  w0="$(date +%s.%N)"
  run_oha "$url" "$ACC_C" "$ACC_S" "$BODY_ACC" "$LIMITED_KEY" "$RAW/acc-$v.json"
  w1="$(date +%s.%N)"
  redis_info "$RAW/acc-$v.info1"
  # One more now: refused, with the gateway's own code.
  code="$(curl -s -o "$RAW/acc-$v.refused" -w '%{http_code}' -H 'content-type: application/json' \
    -H "authorization: Bearer $LIMITED_KEY" -d "$BODY_ACC" "$url")"
  python3 "$BENCH/fleet_report.py" --acc "$RAW/acc-$v.json" "$v" "$ACC_S" "$ACC_RPM" "$code" "$RAW/acc-$v.refused" \
    "$RAW/acc-$v.info0" "$RAW/acc-$v.info1" "$w0" "$w1" >>"$RAW/acc.jsonl"
  log "accuracy $v: $(tail -n1 "$RAW/acc.jsonl")"
}
backend_errors start
for v in $ACC_VARIANTS; do acc_run "$v"; done
backend_errors accuracy

while [ $((SECONDS - FILL_T0)) -lt "$FILL_S" ]; do sleep 1; done
if [ "$FILL_S" -gt 0 ]; then log "windows filled ($((SECONDS - FILL_T0)) s): $(rcli hlen bench:client:bench:tpm) buckets live in bench:client:bench:tpm"; fi

# ---------------------------------------------------------------- throughput runs
log "$REPEATS repeats x variants ($VARIANTS) x (${WARMUP}+${DURATION}) s"
for rep in $(seq "$REPEATS"); do
  for v in $VARIANTS; do measure "$v" "$rep"; done
done
backend_errors throughput
fill_signal CONT
for p in "${FILL_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; forget_pid "$p"; done

# ---------------------------------------------------------------- the script alone
# What the admission itself costs Redis with nothing around it: the gateways' script (its text
# from the source), the bench's four windows, sent by redis-benchmark pipelined SCRIPT_P deep
# over 3 connections (one per instance) — no gateway, no per-request socket work. With the
# trio's CPU (three gateways on the memory store behind the same nginx) it is the floor under
# the fleet's CPU per request on this machine, whatever the client does.
python3 - "$ROOT/crates/switchyard/src/state/redis.rs" >"$RAW/admit.lua" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
# ADMIT is concat!(raw strings, lua_windows!() …): put the pieces together as the compiler does.
shared = re.search(r'macro_rules! lua_windows \{\s*\(\) => \{\s*r"(.*?)"\s*\};', src, re.S).group(1)
body = re.search(r'const ADMIT: &str = concat!\((.*?)\n\);', src, re.S).group(1)
parts = re.findall(r'r"(.*?)"|(lua_windows!\(\))', body, re.S)
sys.stdout.write("".join(shared if macro else raw for raw, macro in parts))
PY
ADMIT_SHA="$(rcli -x script load <"$RAW/admit.lua")"
NOW_MS="$(date +%s%3N)"
BUCKET=$((NOW_MS / 6000)) # the bucket a 60 s window charges now (contract: 10 per window)
SCRIPT_N=200000
s0="$(cpu_ticks "$REDIS_PID")"
redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" -n "$SCRIPT_N" -c 3 -P "$SCRIPT_P" -q \
  evalsha "$ADMIT_SHA" 8 floor:c:rpm floor:c:tpm floor:d:rpm floor:d:tpm \
  floor:c:rpm:l floor:c:tpm:l floor:d:rpm:l floor:d:tpm:l 10 "" "$NOW_MS" \
  "$HIGH_RPM" 1 "$BUCKET" 120000 s 0 "$HIGH_TPM" 30 "$BUCKET" 120000 a 0 \
  "$HIGH_RPM" 1 "$BUCKET" 120000 s 0 "$HIGH_TPM" 30 "$BUCKET" 120000 a 0 \
  >"$RAW/script.out" 2>&1 || die "redis-benchmark failed (see $RAW/script.out)"
s1="$(cpu_ticks "$REDIS_PID")"
[ "$(rcli hget floor:c:tpm t)" = "$((SCRIPT_N * 30))" ] || die "the script-alone run did not charge every call"
printf '{"n": %d, "pipeline": %d, "ticks": %d, "hz": %d}\n' "$SCRIPT_N" "$SCRIPT_P" "$((s1 - s0))" "$HZ" >"$RAW/script.json"
rcli del floor:c:rpm floor:c:tpm floor:d:rpm floor:d:tpm >/dev/null
log "script alone: $(cat "$RAW/script.json")"

# ---------------------------------------------------------------- MONITOR sample
# Which of the commands Redis counts are sent by the gateways and which run inside the admission
# script ("[0 lua]" in MONITOR's output): a short separate run through the fleet. Not part of the
# CPU or commandstats figures (MONITOR costs Redis a good deal).
if [ "$MONITOR_S" -gt 0 ]; then
  rcli monitor >"$RAW/monitor.txt" 2>/dev/null &
  MON_PID=$!; PIDS+=("$MON_PID")
  sleep 0.5
  w0="$(date +%s.%N)"
  run_oha "$(variant_url fleet)" "$MONITOR_C" "$MONITOR_S" "$BODY" "$BENCH_KEY" "$RAW/monitor-run.json"
  w1="$(date +%s.%N)"
  sleep 0.5
  kill -TERM "$MON_PID" 2>/dev/null || true
  wait "$MON_PID" 2>/dev/null || true
  python3 "$BENCH/fleet_report.py" --monitor "$RAW/monitor.txt" "$RAW/monitor-run.json" "$w0" "$w1" >"$RAW/monitor.json"
  rm -f "$RAW/monitor.txt"
  log "monitor sample: $(cat "$RAW/monitor.json")"
  backend_errors monitor
fi

# ---------------------------------------------------------------- report
python3 "$BENCH/fleet_report.py" --report "$RAW" "$RES/fleet.md"
log "report written to bench/results/fleet.md (raw data in bench/results/fleet/)"
