//! Client-supplied JSON the gateway rewrites rather than parses: the tool
//! schemas sanitised for Gemini (`$ref`s resolved, unions folded), and the
//! small text helpers over raw JSON.

use proptest::prelude::*;
use serde_json::{Map, Value};
use switchyard_protocol::{gemini, json};

use crate::support::*;

/// Keys a JSON Schema is made of, so arbitrary values look like schemas.
const KEYS: [&str; 18] = [
    "type",
    "properties",
    "items",
    "$ref",
    "$defs",
    "definitions",
    "anyOf",
    "oneOf",
    "allOf",
    "enum",
    "const",
    "required",
    "format",
    "description",
    "nullable",
    "a",
    "b",
    "c",
];

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![
            "object",
            "string",
            "null",
            "array",
            "integer",
            "#/$defs/a",
            "#/$defs/b",
            "#/definitions/a",
            "#/$defs/",
            "#",
            "date-time",
            "a",
            "",
        ])
        .prop_map(Value::from),
    ]
}

fn schema_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(8, 256, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((prop::sample::select(KEYS.to_vec()), inner), 0..6).prop_map(
                |kv| Value::Object(
                    kv.into_iter()
                        .map(|(k, v)| (k.to_owned(), v))
                        .collect::<Map<_, _>>()
                )
            ),
        ]
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn gemini_schema_sanitiser(schema in schema_value()) {
        within("sanitize_schema", move || {
            let n = serde_json::to_vec(&schema).unwrap().len();
            let out = gemini::sanitize_schema(&schema);
            let written = serde_json::to_vec(&out).unwrap().len();
            assert!(written <= bound(n, 64), "{written} bytes of schema from {n}");
        });
    }

    /// Compacting pretty JSON gives the compact text, byte for byte.
    #[test]
    fn compact_json_keeps_the_text(v in schema_value()) {
        let pretty = serde_json::to_string_pretty(&v).unwrap();
        prop_assert_eq!(json::compact_json(&pretty), serde_json::to_string(&v).unwrap());
    }

    #[test]
    fn synthesized_call_ids(text in ".{0,40}") {
        let _ = gemini::name_from_call_id(&text);
        let id = gemini::synth_call_id(3, &text, &text);
        if !text.is_empty() {
            prop_assert_eq!(gemini::name_from_call_id(&id), Some(text.as_str()));
        }
    }
}
