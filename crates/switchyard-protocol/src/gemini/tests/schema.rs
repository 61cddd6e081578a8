use serde_json::json;

use super::*;

#[test]
fn refs_consts_and_nullables_are_rewritten() {
    let schema = json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "title": "Order",
        "additionalProperties": false,
        "$defs": {
            "Item": {
                "type": "object",
                "properties": {
                    "sku": {"type": "string", "format": "uuid", "examples": ["x"]},
                    "qty": {"type": "integer", "format": "int32", "default": 1}
                },
                "required": ["sku", "ghost"],
                "additionalProperties": false
            }
        },
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
            "kind": {"const": "order"},
            "note": {"type": ["string", "null"], "description": "free text"},
            "when": {"anyOf": [{"type": "string", "format": "date-time"}, {"type": "null"}]},
            "size": {"type": "integer", "enum": [1, 2, 3]},
            "either": {"oneOf": [{"type": "string"}, {"type": "number"}]},
            "meta": {"type": "object", "properties": {}},
            "tree": {"$ref": "#/$defs/Tree"}
        },
        "required": ["items", "kind"]
    });
    let out = sanitize_schema(&schema).unwrap();
    assert_eq!(
        out,
        json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "qty": {"type": "integer", "format": "int32"}
                    },
                    "required": ["sku"]
                }},
                "kind": {"type": "string", "enum": ["order"]},
                "note": {"type": "string", "description": "free text", "nullable": true},
                "when": {"type": "string", "format": "date-time", "nullable": true},
                "size": {"type": "integer", "description": "Allowed values: 1, 2, 3."},
                "either": {"anyOf": [{"type": "string"}, {"type": "number"}]},
                "meta": {"type": "object", "properties": {}},
                "tree": {"type": "object"}
            },
            "required": ["items", "kind"]
        })
    );
    assert_no_keys(
        &out,
        &[
            "$schema",
            "$defs",
            "$ref",
            "additionalProperties",
            "title",
            "default",
            "examples",
            "const",
        ],
    );
}

#[test]
fn recursive_refs_stop() {
    let schema = json!({
        "type": "object",
        "properties": {"root": {"$ref": "#/definitions/Node"}},
        "definitions": {"Node": {"type": "object", "properties": {
            "child": {"$ref": "#/definitions/Node"}
        }}}
    });
    let out = sanitize_schema(&schema).unwrap();
    let mut depth = 0;
    let mut cur = &out["properties"]["root"];
    while let Some(next) = cur.get("properties").and_then(|p| p.get("child")) {
        cur = next;
        depth += 1;
    }
    assert!((1..=10).contains(&depth), "{depth}");
}

#[test]
fn empty_object_parameters_are_omitted() {
    for s in [
        json!({"type": "object", "properties": {}}),
        json!({"type": "object"}),
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
        json!({}),
    ] {
        assert_eq!(sanitize_schema(&s), None, "{s}");
    }
    assert!(sanitize_schema(&json!({"type": "string"})).is_some());
}

/// Definitions that each refer to the next ten times: inlined in full that
/// is 10^8 nodes from a few hundred bytes of request. Inlining stops at the
/// node budget and the rest become bare objects.
#[test]
fn a_ref_fan_out_bomb_is_cut_short() {
    let mut defs = serde_json::Map::new();
    for level in 0..8 {
        let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
        let props: serde_json::Map<String, serde_json::Value> =
            (0..10).map(|i| (format!("p{i}"), next.clone())).collect();
        defs.insert(
            format!("d{level}"),
            json!({"type": "object", "properties": props}),
        );
    }
    defs.insert("d8".into(), json!({"type": "string"}));
    let schema =
        json!({"$defs": defs, "type": "object", "properties": {"root": {"$ref": "#/$defs/d0"}}});
    let started = std::time::Instant::now();
    let out = sanitize_schema(&schema).unwrap();
    let written = serde_json::to_vec(&out).unwrap().len();
    assert!(written < 2_000_000, "{written} bytes of schema");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The top of the tree is inlined as before.
    assert_eq!(
        out["properties"]["root"]["properties"]["p0"]["type"],
        "object"
    );
}
