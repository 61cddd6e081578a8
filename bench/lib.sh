# Shared by bench/run.sh, bench/chaos.sh, bench/streams.sh and bench/fleet.sh (sourced). The
# caller sets LOG_TAG (the log prefix) and RAW (where each process writes <name>.log).

log() { printf '[%s %(%H:%M:%S)T] %s\n' "$LOG_TAG" -1 "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# Processes started with `&` and appended here are stopped on exit,
# TERM first, KILL after 5 s.
PIDS=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port pid name
  for _ in $(seq 200); do
    port_busy "$1" && return 0
    kill -0 "$2" 2>/dev/null || die "$3 exited during startup (see $RAW/$3.log)"
    sleep 0.05
  done
  die "$3 did not listen on $1 within 10 s"
}

# /proc readings of processes by PID (bench/run.sh, bench/streams.sh, bench/fleet.sh).
cpu_ticks() { # sum utime+stime (clock ticks) over pids
  local t=0 pid s
  for pid in "$@"; do
    s="$(cat "/proc/$pid/stat" 2>/dev/null)" || continue
    s="${s##*) }"   # drop "pid (comm) " — comm may contain spaces
    set -- $s
    t=$((t + ${12} + ${13}))   # fields 14 and 15 of /proc/PID/stat
  done
  echo "$t"
}
hwm_reset() { local pid; for pid in "$@"; do echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || true; done; }
hwm_kib() { local pid; for pid in "$@"; do awk '/^VmHWM:/ {print $2}' "/proc/$pid/status"; done | awk '{s+=$1} END {print s+0}'; }

# Tools (bench/fleet.sh; bench/run.sh has its own copy inline). The caller sets RES and TOOLS.
APT_UPDATED=0
apt_install() { # PACKAGE...
  command -v apt-get >/dev/null || die "apt-get not available; install $* by hand"
  if [ "$APT_UPDATED" = 0 ]; then
    log "apt-get update"; apt-get update -qq >/dev/null; APT_UPDATED=1
  fi
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
# oha into $TOOLS/bin (cargo install --locked; a few minutes the first time).
install_oha() {
  [ -x "$TOOLS/bin/oha" ] && return 0
  log "installing oha into bench/.tools (cargo install --locked; a few minutes)"
  cargo install --locked --root "$TOOLS" oha >"$RES/oha-install.log" 2>&1
}

# nginx's binary in NGINX_BIN, installed from apt when missing.
find_nginx() {
  NGINX_BIN="$(command -v nginx || true)"
  [ -z "$NGINX_BIN" ] && [ -x /usr/sbin/nginx ] && NGINX_BIN=/usr/sbin/nginx
  if [ -z "$NGINX_BIN" ]; then
    apt_install nginx
    NGINX_BIN="$(command -v nginx || echo /usr/sbin/nginx)"
  fi
}

# Check and start nginx on PREFIX/nginx.conf (its error log under PREFIX/logs, its output in
# LOG), in the foreground under this script, and wait for PORT: its PID in NGINX_PID.
start_nginx() { # PREFIX PORT LOG
  local ngx=$1 port=$2 out=$3
  "$NGINX_BIN" -t -q -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log" >"$out" 2>&1 \
    || { cat "$out" >&2; die "nginx config test failed"; }
  "$NGINX_BIN" -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/logs/error.log" -g 'daemon off;' >>"$out" 2>&1 &
  NGINX_PID=$!; PIDS+=("$NGINX_PID")
  wait_port "$port" "$NGINX_PID" nginx
}
