# Shared by bench/run.sh and bench/chaos.sh (sourced). The caller sets
# LOG_TAG (the log prefix) and RAW (where each process writes <name>.log).

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
