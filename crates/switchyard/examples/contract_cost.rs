//! What checking an answer against its response contract costs (issue:
//! "validation cost for a 2 KB answer against a typical schema, under
//! 20 µs, compiled schemas cached"). Prints one JSON line.
//!
//! cargo run --release --example contract_cost -- [ROUNDS]
//!
//! The schema: an extraction result as teams ask for it (an object with
//! typed, required fields, an enum, a nested array of line items with a
//! pattern and bounds, no additional properties). The answer: a 2 KB
//! instance that satisfies it. Timed: `Schemas::check` with the compiled
//! schema cached (what every answer after the first pays: parse the text,
//! hash the schema, validate), and the first call (compilation included).

use std::hint::black_box;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use switchyard::contract::Schemas;

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "invoice_id": {"type": "string", "pattern": "^INV-[0-9]{6}$"},
            "customer": {"type": "object", "properties": {
                "name": {"type": "string", "minLength": 1},
                "email": {"type": "string"},
                "country": {"type": "string", "enum": ["DE", "FR", "US", "CN", "JP"]}
            }, "required": ["name", "country"], "additionalProperties": false},
            "issued": {"type": "string"},
            "currency": {"type": "string", "enum": ["EUR", "USD", "CNY", "JPY"]},
            "lines": {"type": "array", "minItems": 1, "maxItems": 50, "items": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
                    "description": {"type": "string"},
                    "quantity": {"type": "integer", "minimum": 1},
                    "unit_price": {"type": "number", "minimum": 0}
                },
                "required": ["sku", "description", "quantity", "unit_price"],
                "additionalProperties": false
            }},
            "total": {"type": "number", "minimum": 0},
            "notes": {"type": ["string", "null"]}
        },
        "required": ["invoice_id", "customer", "issued", "currency", "lines", "total"],
        "additionalProperties": false
    })
}

/// A conforming answer of about 2 KB.
fn answer() -> String {
    let lines: Vec<Value> = (0..16)
        .map(|i| {
            json!({"sku": format!("ABC-{:04}", 1000 + i), "description": format!("Replacement part number {i} for the pump assembly"), "quantity": i + 1, "unit_price": 12.5 + f64::from(i)})
        })
        .collect();
    json!({
        "invoice_id": "INV-004217",
        "customer": {"name": "Muster GmbH", "email": "billing@example.com", "country": "DE"},
        "issued": "2026-11-30",
        "currency": "EUR",
        "lines": lines,
        "total": 1234.5,
        "notes": null
    })
    .to_string()
}

fn main() -> Result<(), String> {
    let rounds: usize = std::env::args()
        .nth(1)
        .map_or(Ok(7), |a| a.parse().map_err(|e| format!("ROUNDS: {e}")))?;
    let (schema, answer) = (schema(), answer());
    let first = {
        let s = Schemas::default();
        let t = Instant::now();
        s.check(&schema, &answer).map_err(|v| v.message)?;
        t.elapsed()
    };
    let s = Schemas::default();
    s.check(&schema, &answer).map_err(|v| v.message)?;
    let calls = 20_000u32;
    let best = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                black_box(s.check(black_box(&schema), black_box(&answer)).is_ok());
            }
            t.elapsed() / calls
        })
        .min()
        .unwrap_or(Duration::ZERO);
    println!(
        "{{\"answer_bytes\":{},\"cached_ns\":{},\"first_call_ns\":{}}}",
        answer.len(),
        best.as_nanos(),
        first.as_nanos()
    );
    Ok(())
}
