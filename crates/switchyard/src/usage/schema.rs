//! The store's schema, one list of migrations for SQLite and PostgreSQL
//! alike (the SQL below is the common dialect of both: `BIGINT`, `TEXT`,
//! `DOUBLE PRECISION`, `ON CONFLICT … DO UPDATE`). Migration `n` runs once,
//! at start-up, in a transaction that also records it; append new ones,
//! never edit an applied one.

pub const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS switchyard_migrations (
    version BIGINT PRIMARY KEY,
    applied_at BIGINT NOT NULL
)";

pub const MIGRATIONS: &[&str] = &[
    // 1: request rows, daily rollups, issued keys, key use, stored responses.
    "CREATE TABLE usage_requests (
        request_id TEXT NOT NULL,
        ts BIGINT NOT NULL,
        client TEXT,
        key_id TEXT,
        route TEXT,
        model TEXT,
        deployment TEXT,
        status BIGINT NOT NULL,
        outcome TEXT NOT NULL,
        stream BIGINT NOT NULL,
        cache TEXT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_input_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        latency_ms DOUBLE PRECISION NOT NULL,
        ttfb_ms DOUBLE PRECISION,
        attempts BIGINT NOT NULL
    );
    -- One index: every read is a time range (a client's spend reads its
    -- window by time and filters; whole days come from the rollups).
    CREATE INDEX usage_requests_ts ON usage_requests (ts);
    CREATE TABLE usage_daily (
        day BIGINT NOT NULL,
        client TEXT NOT NULL,
        route TEXT NOT NULL,
        model TEXT NOT NULL,
        deployment TEXT NOT NULL,
        requests BIGINT NOT NULL,
        errors BIGINT NOT NULL,
        cache_hits BIGINT NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        cached_input_tokens BIGINT NOT NULL,
        cost_usd DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (day, client, route, model, deployment)
    );
    CREATE TABLE client_keys (
        id TEXT PRIMARY KEY,
        client TEXT NOT NULL,
        sha256 TEXT NOT NULL UNIQUE,
        created_at BIGINT NOT NULL,
        revoked_at BIGINT
    );
    CREATE TABLE key_usage (
        key_id TEXT PRIMARY KEY,
        last_used_at BIGINT NOT NULL
    );
    CREATE TABLE stored_responses (
        id TEXT PRIMARY KEY,
        created_at BIGINT NOT NULL,
        expires_at BIGINT NOT NULL,
        body TEXT NOT NULL,
        history TEXT NOT NULL
    );
    CREATE INDEX stored_responses_expires ON stored_responses (expires_at)",
    // 2: whether a row's tokens are the gateway's count (a stream the
    // client cut short, an upstream that reports no usage; contract §8).
    "ALTER TABLE usage_requests ADD COLUMN usage_estimated BIGINT NOT NULL DEFAULT 0",
    // 3: the request's task (scene): `x-switchyard-task`, a task rule's, or
    // the classifier's label (contract §11).
    "ALTER TABLE usage_requests ADD COLUMN task TEXT",
    // 4: a shadow copy of a request (contract §11): the gateway's own call
    // to a route's shadow target, client `_shadow`, never a client's spend.
    "ALTER TABLE usage_requests ADD COLUMN shadow BIGINT NOT NULL DEFAULT 0",
];

pub const INSERT_ROW: &str = "INSERT INTO usage_requests (request_id, ts, client, key_id, route, model, deployment, status, outcome, stream, cache, input_tokens, output_tokens, cached_input_tokens, cost_usd, latency_ms, ttfb_ms, attempts, usage_estimated, task, shadow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
pub const ROW_COLUMNS: usize = 21;

pub const UPSERT_DAY: &str = "INSERT INTO usage_daily (day, client, route, model, deployment, requests, errors, cache_hits, input_tokens, output_tokens, cached_input_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (day, client, route, model, deployment) DO UPDATE SET
        requests = usage_daily.requests + excluded.requests,
        errors = usage_daily.errors + excluded.errors,
        cache_hits = usage_daily.cache_hits + excluded.cache_hits,
        input_tokens = usage_daily.input_tokens + excluded.input_tokens,
        output_tokens = usage_daily.output_tokens + excluded.output_tokens,
        cached_input_tokens = usage_daily.cached_input_tokens + excluded.cached_input_tokens,
        cost_usd = usage_daily.cost_usd + excluded.cost_usd";

pub const UPSERT_KEY_USE: &str = "INSERT INTO key_usage (key_id, last_used_at) VALUES (?, ?)
    ON CONFLICT (key_id) DO UPDATE SET last_used_at =
        CASE WHEN excluded.last_used_at > key_usage.last_used_at THEN excluded.last_used_at ELSE key_usage.last_used_at END";

pub const PUT_RESPONSE: &str = "INSERT INTO stored_responses (id, created_at, expires_at, body, history) VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (id) DO UPDATE SET created_at = excluded.created_at, expires_at = excluded.expires_at, body = excluded.body, history = excluded.history";
pub const GET_RESPONSE: &str =
    "SELECT body, history, expires_at FROM stored_responses WHERE id = ? AND expires_at > ?";
pub const DELETE_RESPONSE: &str = "DELETE FROM stored_responses WHERE id = ?";

pub const INSERT_KEY: &str =
    "INSERT INTO client_keys (id, client, sha256, created_at) VALUES (?, ?, ?, ?)";
pub const REVOKE_KEY: &str =
    "UPDATE client_keys SET revoked_at = ? WHERE id = ? AND client = ? AND revoked_at IS NULL";
pub const ACTIVE_KEYS: &str =
    "SELECT id, client, sha256, created_at FROM client_keys WHERE revoked_at IS NULL ORDER BY created_at, id";
pub const KEY_USE: &str = "SELECT key_id, last_used_at FROM key_usage";

pub const DELETE_OLD_ROWS: &str = "DELETE FROM usage_requests WHERE ts < ?";
pub const DELETE_EXPIRED_RESPONSES: &str = "DELETE FROM stored_responses WHERE expires_at <= ?";

/// Totals per group from request rows in `[?, ?)` (and one client's, when
/// `client` is set). `col` is one of [`super::query::GroupBy::column`].
pub fn rows_totals(col: &str, one_client: bool) -> String {
    format!(
        "SELECT COALESCE({col}, ''), CAST(COUNT(*) AS BIGINT),
            CAST(SUM(CASE WHEN status >= 400 THEN 1 ELSE 0 END) AS BIGINT),
            CAST(SUM(CASE WHEN cache = 'hit' THEN 1 ELSE 0 END) AS BIGINT),
            CAST(SUM(input_tokens) AS BIGINT), CAST(SUM(output_tokens) AS BIGINT),
            CAST(SUM(cached_input_tokens) AS BIGINT), CAST(SUM(cost_usd) AS DOUBLE PRECISION)
         FROM usage_requests WHERE ts >= ? AND ts < ?{}
         GROUP BY COALESCE({col}, '')",
        if one_client { " AND client = ?" } else { "" }
    )
}

/// Totals per group from the rollups of days `[?, ?)`.
pub fn days_totals(col: &str, one_client: bool) -> String {
    format!(
        "SELECT {col}, CAST(SUM(requests) AS BIGINT), CAST(SUM(errors) AS BIGINT),
            CAST(SUM(cache_hits) AS BIGINT), CAST(SUM(input_tokens) AS BIGINT),
            CAST(SUM(output_tokens) AS BIGINT), CAST(SUM(cached_input_tokens) AS BIGINT),
            CAST(SUM(cost_usd) AS DOUBLE PRECISION)
         FROM usage_daily WHERE day >= ? AND day < ?{}
         GROUP BY {col}",
        if one_client { " AND client = ?" } else { "" }
    )
}

/// `?` placeholders as PostgreSQL's `$1, $2, …` (the statements here have
/// no `?` inside string literals).
pub fn numbered(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut n = 0;
    for c in sql.chars() {
        if c == '?' {
            n += 1;
            out.push('$');
            out.push_str(&n.to_string());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn placeholders_are_numbered_for_postgres() {
        assert_eq!(super::numbered("a = ? AND b < ?"), "a = $1 AND b < $2");
    }
}
