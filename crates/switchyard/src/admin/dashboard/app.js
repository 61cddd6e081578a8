// The switchyard dashboard: polls the admin JSON of the origin that served
// it and updates the tables in place (rows keyed by id, cells rewritten only
// when their text changes, so a selection or a hover survives a tick).
// Every value goes in as text, never as markup.
'use strict';

const FAST_MS = 1000; // state, decisions and shadow traffic
const SLOW_MS = 5000; // usage and clients (a store query each)
const DECISIONS = 50;

const $ = (id) => document.getElementById(id);

// --- formatting -----------------------------------------------------------

function compact(n) {
  if (n === null || n === undefined) return '–';
  const a = Math.abs(n);
  if (a >= 1e9) return (n / 1e9).toFixed(1) + 'G';
  if (a >= 1e6) return (n / 1e6).toFixed(1) + 'M';
  if (a >= 1e4) return (n / 1e3).toFixed(1) + 'k';
  return String(Math.round(n));
}

function ms(v) {
  if (v === null || v === undefined) return '–';
  return v >= 100 ? String(Math.round(v)) : v.toFixed(1);
}

// Per-request costs are often fractions of a cent: down to micro-dollars.
function usd(v) {
  if (v === null || v === undefined) return '–';
  if (v === 0) return '$0';
  if (v >= 100) return '$' + Math.round(v).toLocaleString('en-US');
  if (v >= 1) return '$' + v.toFixed(2);
  if (v >= 0.01) return '$' + v.toFixed(4);
  if (v < 1e-6) return '<$0.000001';
  return '$' + v.toFixed(6);
}

function pct(v) {
  return v === null || v === undefined ? '–' : (v * 100).toFixed(1) + '%';
}

function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return String(iso);
  const p = (n, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${p(d.getMilliseconds(), 3)}`;
}

// --- DOM helpers ----------------------------------------------------------

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function setText(e, text) {
  const t = text === null || text === undefined ? '' : String(text);
  if (e.textContent !== t) e.textContent = t;
}

function setClass(e, cls) {
  if (e.className !== cls) e.className = cls;
}

// Rows of `tbody` made to match `items`, in order: a row per key, created
// by `make` once (it gets the new <tr>), refreshed by `fill` every tick.
function syncRows(tbody, items, keyOf, make, fill) {
  const old = new Map();
  for (const tr of tbody.rows) old.set(tr.dataset.key, tr);
  let at = 0;
  for (const item of items) {
    const key = keyOf(item);
    let tr = old.get(key);
    if (tr) {
      old.delete(key);
    } else {
      tr = document.createElement('tr');
      tr.dataset.key = key;
      make(tr, item);
    }
    fill(tr, item);
    if (tbody.rows[at] !== tr) tbody.insertBefore(tr, tbody.rows[at] || null);
    at += 1;
  }
  for (const tr of old.values()) tr.remove();
}

// A <td data-field=name> per field name, in order.
function cells(tr, names, numeric = []) {
  for (const n of names) {
    const td = el('td', numeric.includes(n) ? 'num' : '');
    td.dataset.field = n;
    tr.appendChild(td);
  }
}

function cell(tr, name) {
  return tr.querySelector(`td[data-field="${name}"]`);
}

function showEmpty(id, message) {
  const p = $(id);
  p.hidden = !message;
  if (message) setText(p, message);
}

// A used/limit figure with a bar: amber past 70 %, red past 90 %.
function meter(td, used, limit) {
  if (!td.firstChild) {
    const text = el('span', 'meter-text');
    const track = el('span', 'meter');
    track.appendChild(el('span', 'meter-fill'));
    td.append(text, track);
  }
  const [text, track] = td.children;
  const fill = track.firstChild;
  if (limit === null || limit === undefined) {
    setText(text, `${compact(used)} / no limit`);
    track.hidden = true;
    return;
  }
  const ratio = limit > 0 ? Math.min(used / limit, 1) : 1;
  setText(text, `${compact(used)} / ${compact(limit)}`);
  track.hidden = false;
  fill.style.width = (ratio * 100).toFixed(1) + '%';
  setClass(fill, 'meter-fill' + (ratio >= 0.9 ? ' hot' : ratio >= 0.7 ? ' warm' : ''));
}

// --- the tables -----------------------------------------------------------

const circuitOf = new Map(); // deployment id → circuit, for the route chips

function renderState(s) {
  setText($('config-version'), s.config_version);
  const deps = s.deployments || [];
  circuitOf.clear();
  const counts = { closed: 0, half_open: 0, open: 0 };
  for (const d of deps) {
    circuitOf.set(d.id, d.circuit);
    counts[d.circuit] = (counts[d.circuit] || 0) + 1;
  }
  renderSummary(counts, deps.length);
  setText($('deployments-count'), deps.length);
  showEmpty('deployments-empty', deps.length ? '' : 'no deployments in this config');
  syncRows(
    $('deployments').tBodies[0],
    deps,
    (d) => d.id,
    (tr, d) => {
      tr.dataset.deployment = d.id;
      cells(
        tr,
        ['id', 'provider', 'circuit', 'health_score', 'error_rate', 'latency_p50_ms', 'latency_p95_ms', 'inflight', 'rpm', 'tpm', 'keys', 'probe'],
        ['health_score', 'error_rate', 'latency_p50_ms', 'latency_p95_ms', 'inflight'],
      );
      const id = cell(tr, 'id');
      id.append(el('span', 'mono', d.id), el('span', 'sub'));
    },
    fillDeployment,
  );
  renderRoutes(s.routes || []);
}

function fillDeployment(tr, d) {
  const id = cell(tr, 'id');
  setText(id.lastChild, d.model && !d.id.endsWith('/' + d.model) ? d.model : '');
  setText(cell(tr, 'provider'), d.provider || '–');
  const c = cell(tr, 'circuit');
  if (!c.firstChild) c.appendChild(el('span'));
  setText(c.firstChild, d.circuit);
  setClass(c.firstChild, `badge circuit-${d.circuit}`);
  tr.dataset.circuit = d.circuit;
  setClass(tr, d.circuit === 'closed' ? '' : `row-${d.circuit}`);
  const h = cell(tr, 'health_score');
  setText(h, d.health_score.toFixed(2));
  setClass(h, 'num ' + (d.health_score >= 0.8 ? 'good' : d.health_score >= 0.5 ? 'warn' : 'bad'));
  const e = cell(tr, 'error_rate');
  setText(e, pct(d.error_rate));
  setClass(e, 'num ' + (d.error_rate > 0.1 ? 'bad' : d.error_rate > 0.01 ? 'warn' : ''));
  setText(cell(tr, 'latency_p50_ms'), ms(d.latency_p50_ms));
  setText(cell(tr, 'latency_p95_ms'), ms(d.latency_p95_ms));
  setText(cell(tr, 'inflight'), d.inflight);
  meter(cell(tr, 'rpm'), d.rpm_used, d.rpm_limit);
  meter(cell(tr, 'tpm'), d.tpm_used, d.tpm_limit);
  renderKeys(cell(tr, 'keys'), d.keys || []);
  renderProbe(cell(tr, 'probe'), d.last_probe, d.keys || []);
}

// The deployment's last background probe, and its keys' in the tooltip.
function renderProbe(td, p, keys) {
  const keyNotes = keys
    .filter((k) => k.last_probe)
    .map((k) => `${k.label}: ${k.last_probe.result} (${k.last_probe.reason})`);
  const text = p ? `${p.result} · ${p.kind} · ${p.reason} · ${p.latency_ms} ms` : '–';
  const title = [p && p.error ? p.error : '', ...keyNotes].filter(Boolean).join('\n');
  const key = `${text}|${title}|${p ? p.at_ms : ''}`;
  if (td.dataset.text === key) return;
  td.dataset.text = key;
  td.title = title;
  const when = p ? ` ${ago(p.at_ms)}` : '';
  td.replaceChildren(
    p ? el('span', p.result === 'ok' ? 'good' : 'bad', text + when) : el('span', 'dim', '–'),
  );
}

function ago(atMs) {
  const s = Math.max(0, Math.round((Date.now() - atMs) / 1000));
  return s < 60 ? `${s}s ago` : `${Math.round(s / 60)}m ago`;
}

function renderKeys(td, keys) {
  const text = keys.length ? keys.map((k) => `${k.label}: ${k.status}`).join(', ') : 'no keys';
  if (td.dataset.text === text) return;
  td.dataset.text = text;
  td.title = text;
  const active = keys.filter((k) => k.status === 'active').length;
  td.replaceChildren(
    keys.length ? el('span', active === keys.length ? 'good' : 'warn', `${active}/${keys.length} active`) : el('span', 'dim', '–'),
  );
}

function renderSummary(counts, total) {
  const box = $('summary');
  const key = `${total}:${counts.closed}:${counts.half_open}:${counts.open}`;
  if (box.dataset.key === key) return;
  box.dataset.key = key;
  const parts = [el('span', 'dim', `${total} deployments`)];
  for (const state of ['closed', 'half_open', 'open']) {
    if (counts[state]) parts.push(el('span', `pill circuit-${state}`, `${counts[state]} ${state}`));
  }
  box.replaceChildren(...parts);
}

function renderRoutes(routes) {
  setText($('routes-count'), routes.length);
  showEmpty('routes-empty', routes.length ? '' : 'no routes: requests name deployments directly');
  syncRows(
    $('routes').tBodies[0],
    routes,
    (r) => r.name,
    (tr, r) => {
      tr.dataset.route = r.name;
      cells(tr, ['name', 'strategy', 'targets', 'fallbacks']);
    },
    (tr, r) => {
      setText(cell(tr, 'name'), r.name);
      setText(cell(tr, 'strategy'), r.strategy);
      chips(cell(tr, 'targets'), r.targets);
      chips(cell(tr, 'fallbacks'), r.fallbacks);
    },
  );
}

// Deployment ids as chips coloured by their circuit.
function chips(td, ids) {
  const key = ids.map((id) => `${id}=${circuitOf.get(id) || '?'}`).join(' ');
  if (td.dataset.key === key) return;
  td.dataset.key = key;
  if (!ids.length) {
    td.replaceChildren(el('span', 'dim', '–'));
    return;
  }
  td.replaceChildren(...ids.map((id) => {
    const c = el('span', `chip circuit-${circuitOf.get(id) || 'unknown'}`, id);
    c.title = `${id}: ${circuitOf.get(id) || 'not a deployment'}`;
    return c;
  }));
}

const seen = new Set(); // request ids already shown: new rows flash once
let firstDecisions = true;

function renderDecisions(list) {
  setText($('decisions-count'), list.length ? `last ${list.length}` : '');
  showEmpty('decisions-empty', list.length ? '' : 'no requests since the gateway started');
  syncRows(
    $('decisions').tBodies[0],
    list,
    (d) => `${d.request_id}@${d.ts}`,
    (tr, d) => {
      tr.dataset.requestId = d.request_id;
      cells(
        tr,
        ['ts', 'request_id', 'client', 'route', 'selected', 'decision_reason', 'fallback_reason', 'status', 'attempts', 'duration_ms', 'cost_usd', 'cache'],
        ['status', 'attempts', 'duration_ms', 'cost_usd'],
      );
      if (!firstDecisions && !seen.has(d.request_id)) tr.classList.add('fresh');
      seen.add(d.request_id);
    },
    fillDecision,
  );
  firstDecisions = false;
  if (seen.size > 1000) seen.clear();
}

function fillDecision(tr, d) {
  setText(cell(tr, 'ts'), clock(d.ts));
  const id = cell(tr, 'request_id');
  setText(id, d.request_id);
  id.title = d.request_id;
  setClass(id, 'mono ellipsis');
  setText(cell(tr, 'client'), d.client || '–');
  setText(cell(tr, 'route'), d.route || '–');
  setText(cell(tr, 'selected'), d.selected || '–');
  setText(cell(tr, 'decision_reason'), d.decision_reason || '–');
  const fb = cell(tr, 'fallback_reason');
  setText(fb, d.fallback_reason || '–');
  setClass(fb, d.fallback_reason ? 'warn' : 'dim');
  const st = cell(tr, 'status');
  setText(st, d.error ? `${d.status} ${d.error}` : d.status);
  setClass(st, 'num ' + (d.status >= 500 || d.status === 499 ? 'bad' : d.status >= 400 ? 'warn' : 'good'));
  setText(cell(tr, 'attempts'), d.attempts);
  setText(cell(tr, 'duration_ms'), ms(d.duration_ms));
  setText(cell(tr, 'cost_usd'), usd(d.cost_usd));
  const cache = cell(tr, 'cache');
  setText(cache, d.cache + (d.stream ? ' · stream' : ''));
  setClass(cache, d.cache === 'hit' ? 'good' : 'dim');
}

// --- shadow traffic ---------------------------------------------------------

// A cost ratio (shadow over primary), `–` until a pair was compared.
function ratio(v) {
  return v === null || v === undefined ? '–' : v.toFixed(2) + '×';
}

// Latency: the shadow's beside the primary's (shadow / primary).
function pair(shadow, primary) {
  return `${ms(shadow)} / ${ms(primary)}`;
}

function renderShadow(s) {
  const rows = s.shadows || [];
  setText($('shadow-count'), rows.length ? `queue ${s.queued}/${s.queue}` : '');
  showEmpty('shadow-empty', rows.length ? '' : 'no route has a shadow');
  syncRows(
    $('shadow').tBodies[0],
    rows,
    (r) => `${r.route}\u0000${r.target}`,
    (tr, r) => {
      tr.dataset.shadow = `${r.route}>${r.target}`;
      const numeric = ['requests', 'errors', 'dropped', 'p50', 'p95', 'cost_ratio', 'finish', 'tools', 'schema', 'similarity'];
      cells(tr, ['route', 'target', ...numeric], numeric);
    },
    (tr, r) => {
      setText(cell(tr, 'route'), r.route);
      setText(cell(tr, 'target'), r.target);
      setText(cell(tr, 'requests'), compact(r.requests));
      const e = cell(tr, 'errors');
      setText(e, compact(r.errors) + (r.skipped ? ` (+${compact(r.skipped)} skipped)` : ''));
      setClass(e, 'num ' + (r.errors ? 'bad' : 'dim'));
      const d = cell(tr, 'dropped');
      setText(d, compact(r.dropped));
      setClass(d, 'num ' + (r.dropped ? 'warn' : 'dim'));
      const p50 = cell(tr, 'p50');
      setText(p50, pair(r.shadow_p50_ms, r.primary_p50_ms));
      p50.title = 'shadow / primary';
      const p95 = cell(tr, 'p95');
      setText(p95, pair(r.shadow_p95_ms, r.primary_p95_ms));
      p95.title = 'shadow / primary';
      setText(cell(tr, 'cost_ratio'), ratio(r.cost_ratio));
      setText(cell(tr, 'finish'), pct(r.finish_reason_agreement));
      setText(cell(tr, 'tools'), pct(r.tool_call_agreement));
      setText(cell(tr, 'schema'), r.schema_checked ? pct(r.schema_validity) : '–');
      setText(cell(tr, 'similarity'), r.text_similarity === null || r.text_similarity === undefined ? '–' : r.text_similarity.toFixed(2));
    },
  );
}

// --- spend ----------------------------------------------------------------

let limitsOf = new Map(); // client id → its /admin/clients entry

function limitsText(c) {
  if (!c) return '';
  const parts = [];
  if (c.rpm) parts.push(`${compact(c.rpm)} rpm`);
  if (c.tpm) parts.push(`${compact(c.tpm)} tpm`);
  if (c.budget) parts.push(`${usd(c.budget.spent_usd)} of ${usd(c.budget.usd)}/${c.budget.per}`);
  return parts.length ? 'limits ' + parts.join(' · ') : 'no limits';
}

function renderSpend(tableId, emptyId, rows, withLimits) {
  const total = { key: '\u0000total', requests: 0, errors: 0, input_tokens: 0, output_tokens: 0, cost_usd: 0 };
  for (const r of rows) {
    for (const f of ['requests', 'errors', 'input_tokens', 'output_tokens', 'cost_usd']) total[f] += r[f] || 0;
  }
  const all = rows.length > 1 ? [...rows, total] : rows;
  const fields = ['key', 'requests', 'errors', 'input_tokens', 'output_tokens', 'cost_usd'];
  showEmpty(emptyId, rows.length ? '' : 'no requests in the last 24 h');
  syncRows(
    $(tableId).tBodies[0],
    all,
    (r) => String(r.key),
    (tr, r) => {
      tr.dataset.row = r === total ? 'total' : String(r.key);
      if (r === total) tr.className = 'total';
      cells(tr, fields, ['requests', 'errors', 'input_tokens', 'output_tokens', 'cost_usd']);
      cell(tr, 'key').append(el('span'), el('span', 'sub'));
    },
    (tr, r) => {
      const key = cell(tr, 'key');
      setText(key.firstChild, r === total ? 'total' : r.key === null ? '(none)' : r.key);
      // A client's limits under its name.
      setText(key.lastChild, withLimits && r !== total ? limitsText(limitsOf.get(r.key)) : '');
      setText(cell(tr, 'requests'), compact(r.requests));
      const e = cell(tr, 'errors');
      setText(e, compact(r.errors));
      setClass(e, 'num ' + (r.errors ? 'bad' : 'dim'));
      setText(cell(tr, 'input_tokens'), compact(r.input_tokens));
      setText(cell(tr, 'output_tokens'), compact(r.output_tokens));
      setText(cell(tr, 'cost_usd'), usd(r.cost_usd));
    },
  );
}

function spendOff(message) {
  for (const [table, empty] of [['spend-client', 'spend-client-empty'], ['spend-model', 'spend-model-empty']]) {
    $(table).tBodies[0].replaceChildren();
    showEmpty(empty, message);
  }
}

// --- polling --------------------------------------------------------------

class HttpError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function getJSON(path) {
  const r = await fetch(path, { cache: 'no-store', credentials: 'same-origin', headers: { accept: 'application/json' } });
  if (!r.ok) {
    let body = null;
    try {
      body = await r.json();
    } catch (_) {
      // not JSON: the status says enough
    }
    const err = body && body.error ? body.error : {};
    throw new HttpError(r.status, err.code || '', err.message || `${path}: HTTP ${r.status}`);
  }
  return r.json();
}

let lastOk = 0;

function connection(ok, why) {
  const c = $('conn');
  document.body.classList.toggle('stale', !ok);
  if (ok) {
    lastOk = Date.now();
    setText(c, 'live');
    setClass(c, 'conn conn-live');
    c.title = '';
    setText($('updated'), new Date(lastOk).toLocaleTimeString());
  } else {
    setText(c, why && why.status === 401 ? 'unauthorized' : 'disconnected');
    setClass(c, 'conn conn-down');
    c.title = why ? why.message : '';
    const ago = lastOk ? `${Math.round((Date.now() - lastOk) / 1000)} s ago` : 'never';
    setText($('updated'), ago);
  }
}

async function fast() {
  try {
    const [state, decisions, shadow] = await Promise.all([
      getJSON('/admin/state'),
      getJSON(`/admin/decisions?limit=${DECISIONS}`),
      getJSON('/admin/shadow'),
    ]);
    renderState(state);
    renderDecisions(decisions.decisions || []);
    renderShadow(shadow);
    connection(true);
  } catch (e) {
    connection(false, e);
  }
  setTimeout(fast, FAST_MS);
}

async function slow() {
  try {
    const clients = await getJSON('/admin/clients').catch((e) => {
      if (e.code === 'usage_store_off' || e.status === 404) return { clients: [] };
      throw e;
    });
    limitsOf = new Map((clients.clients || []).map((c) => [c.id, c]));
    const [byClient, byModel] = await Promise.all([
      getJSON('/admin/usage?group_by=client&since=24h'),
      getJSON('/admin/usage?group_by=model&since=24h'),
    ]);
    renderSpend('spend-client', 'spend-client-empty', byClient.rows || [], true);
    renderSpend('spend-model', 'spend-model-empty', byModel.rows || [], false);
  } catch (e) {
    if (e.code === 'usage_store_off') {
      spendOff('usage store off: set usage.store to sqlite or postgres to see spend');
    } else if (e instanceof HttpError) {
      spendOff(`usage unavailable: ${e.message}`);
    }
    // A network error shows as "disconnected" from the fast loop; keep the last figures.
  }
  setTimeout(slow, SLOW_MS);
}

fast();
slow();
