-- Fallback load script for wrk (used by bench/run.sh only when oha cannot be built).
-- Usage: wrk ... -s bench/wrk.lua URL -- 'JSON BODY' ['Name: value' ...]
-- (extra arguments after the body are request headers, e.g. 'anthropic-version: 2023-06-01')
-- Prints one line "WRKJSON {...}" with the same fields run.sh gets from oha.
function init(args)
  wrk.method = "POST"
  wrk.body = args[1]
  wrk.headers["Content-Type"] = "application/json"
  for i = 2, #args do
    local k, v = args[i]:match("^([^:]+):%s*(.-)%s*$")
    if k then wrk.headers[k] = v end
  end
end

function done(summary, latency, requests)
  local secs = summary.duration / 1e6
  local errs = summary.errors.connect + summary.errors.read + summary.errors.write
             + summary.errors.status + summary.errors.timeout
  local ok = summary.requests - summary.errors.status
  io.write(string.format(
    'WRKJSON {"ok": %d, "errors": %d, "rps": %.3f, "p50_ms": %.4f, "p99_ms": %.4f, "p999_ms": %.4f}\n',
    ok, errs, ok / secs, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    latency:percentile(99.9) / 1000))
end
