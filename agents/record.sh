#!/usr/bin/env bash
# Runs the pinned Claude Code and Codex CLIs against agents/capture.py on
# loopback and writes what they send to fixtures/agents/{claude_code,codex}/.
# Needs `npm ci --prefix agents` first. No network beyond 127.0.0.1: every
# run has HTTPS_PROXY/HTTP_PROXY pointed at the capture server itself, so a
# request to any other host shows up in the log as a CONNECT (none do with
# the settings below) instead of leaving the machine.
#
#   bash agents/record.sh            # all scenarios
#   KEEP=1 bash agents/record.sh     # keep the temp dirs (printed)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=$ROOT/agents/node_modules/.bin
OUT=$ROOT/fixtures/agents
WORK=$(mktemp -d "${TMPDIR:-/tmp}/switchyard-agents.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT/claude_code" "$OUT/codex"

CAP_PID=
start_capture() { # dir mode [capture flags...]
  local d=$1 mode=$2; shift 2
  python3 "$ROOT/agents/capture.py" --port 0 --port-file "$d/port" --log "$d/requests.jsonl" \
    --mode "$mode" --command "${CAP_COMMAND:-echo switchyard-tool-ok}" "$@" >"$d/capture.out" 2>&1 &
  CAP_PID=$!
  for _ in $(seq 100); do [ -s "$d/port" ] && break; sleep 0.05; done
  PORT=$(cat "$d/port")
}
stop_capture() { kill "$CAP_PID" 2>/dev/null || true; wait "$CAP_PID" 2>/dev/null || true; }

# split requests.jsonl into one redacted JSON file per request
split_log() { # dir out_dir prefix name...
  python3 - "$@" <<'PY'
import json, sys
d, out, prefix, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
recs = [json.loads(l) for l in open(d + "/requests.jsonl")]
others = [r for r in recs if r["method"] == "CONNECT"]
if others:
    sys.exit("outbound CONNECT seen: %s" % [r["target"] for r in others])
if len(recs) != len(names):
    sys.exit("%s: expected %d requests, got %d: %s" % (prefix, len(names), len(recs),
             [(r["method"], r["target"]) for r in recs]))
for r, name in zip(recs, names):
    h = dict(r["headers"])
    for k in ("x-api-key", "authorization"):
        if k in h:
            h[k] = "<redacted>" if k == "x-api-key" else "Bearer <redacted>"
    h["host"] = "127.0.0.1:<port>"
    rec = {"method": r["method"], "path": r["path"], "query": r["query"], "headers": h, "body": r.get("body")}
    fn = "%s/%s_%s.json" % (out, prefix, name)
    with open(fn, "w") as f:
        json.dump(rec, f, indent=2, ensure_ascii=False)
        f.write("\n")
    print("  wrote", fn)
PY
}

# ---------------------------------------------------------------- Claude Code
claude_run() { # name mode expected_stdout_substring request_names capture_flags -- claude args...
  local name=$1 mode=$2 expect=$3 names=$4 capflags=$5; shift 5
  local d=$WORK/claude-$name; mkdir -p "$d/home" "$d/work"
  # shellcheck disable=SC2086
  start_capture "$d" "$mode" $capflags
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  (cd "$d/work" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$d/home" TERM=dumb \
      HTTPS_PROXY=http://127.0.0.1:$PORT HTTP_PROXY=http://127.0.0.1:$PORT NO_PROXY=127.0.0.1,localhost \
      ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT ANTHROPIC_API_KEY=test-key \
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1 DISABLE_AUTOUPDATER=1 \
      DISABLE_ERROR_REPORTING=1 CLAUDE_CODE_MAX_RETRIES=0 \
      timeout 120 "$BIN/claude" "$@" </dev/null >"$d/stdout" 2>"$d/stderr") || rc=$?
  t1=$(date +%s.%N)
  stop_capture
  printf 'claude %-14s rc=%s %.2fs stdout=%q\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" "$(head -c 200 "$d/stdout")"
  [ "$rc" = 0 ] && grep -qF -- "$expect" "$d/stdout" || { echo "FAILED: $name"; cat "$d/stderr"; exit 1; }
  # shellcheck disable=SC2086
  split_log "$d" "$OUT/claude_code" "$name" $names
}

claude_run text text "Hi from switchyard-capture." "01_messages" "" \
  -p "say hi"
claude_run tool_loop tool "FINAL: switchyard-tool-ok" "01_messages_tool_use 02_messages_tool_result" "" \
  -p "run the marker command" --allowedTools Bash
claude_run thinking tool "FINAL: switchyard-tool-ok" "01_messages 02_messages_thinking_replay" "--thinking" \
  -p "run the marker command" --allowedTools Bash
claude_run sonnet45 tool "FINAL: switchyard-tool-ok" "01_messages 02_messages_tool_result" "" \
  -p "run the marker command" --allowedTools Bash --model claude-sonnet-4-5
# without --allowedTools Bash a command that writes is refused (echo alone is allowed anyway)
CAP_COMMAND="touch made-by-tool" claude_run denied tool "needs approval" "01_messages 02_messages_tool_result_is_error" "" \
  -p "run the marker command"

# ---------------------------------------------------------------------- Codex
codex_run() { # name mode expected_stdout_substring request_names capture_flags model -- codex exec args...
  local name=$1 mode=$2 expect=$3 names=$4 capflags=$5 model=$6; shift 6
  local d=$WORK/codex-$name; mkdir -p "$d/home" "$d/codex" "$d/work"
  # shellcheck disable=SC2086
  start_capture "$d" "$mode" $capflags
  cat >"$d/codex/config.toml" <<TOML
model = "$model"
model_provider = "switchyard"
check_for_update_on_startup = false

[model_providers.switchyard]
name = "switchyard"
base_url = "http://127.0.0.1:$PORT/v1"
env_key = "SWITCHYARD_API_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0
stream_idle_timeout_ms = 30000

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
plugins = false
unbounded_connection_retries = false
TOML
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  (cd "$d/work" && env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$d/home" CODEX_HOME="$d/codex" \
      HTTPS_PROXY=http://127.0.0.1:$PORT HTTP_PROXY=http://127.0.0.1:$PORT NO_PROXY=127.0.0.1,localhost \
      SWITCHYARD_API_KEY=test-key \
      timeout 120 "$BIN/codex" exec --strict-config --skip-git-repo-check --ephemeral \
      --dangerously-bypass-approvals-and-sandbox "$@" </dev/null >"$d/stdout" 2>"$d/stderr") || rc=$?
  t1=$(date +%s.%N)
  stop_capture
  printf 'codex  %-14s rc=%s %.2fs stdout=%q\n' "$name" "$rc" "$(echo "$t1 - $t0" | bc)" "$(head -c 200 "$d/stdout")"
  [ "$rc" = 0 ] && grep -qF -- "$expect" "$d/stdout" || { echo "FAILED: $name"; cat "$d/stderr"; exit 1; }
  # shellcheck disable=SC2086
  split_log "$d" "$OUT/codex" "$name" $names
}

codex_run text text "Hi from switchyard-capture." "01_responses" "" gpt-test \
  "say hi"
codex_run tool_loop tool "switchyard-tool-ok" "01_responses_function_call 02_responses_function_call_output" "" gpt-test \
  "run the marker command"
codex_run gpt55_reasoning tool "switchyard-tool-ok" "01_responses 02_responses_reasoning_replay" "--reasoning" gpt-5.5 \
  "run the marker command"

[ -z "${KEEP:-}" ] || echo "kept $WORK"
