//! Response contracts (contract §11): an answer to a request that asked for
//! JSON with a schema is checked against that schema (JSON Schema 2020-12,
//! the `jsonschema` crate) before the client sees it.
//!
//! A schema is compiled once per distinct schema text and kept
//! ([`Schemas`]: a bounded cache keyed by the schema's hash), so a route
//! that sends the same shape every time pays compilation once. Remote
//! `$ref`s are never fetched (the crate's HTTP and file resolvers are left
//! out): a schema that needs one does not compile, and its answers are
//! passed as they are, with a note saying why.
//!
//! Cost (`examples/contract_cost`, release build, 2026-12-03): a 2 020-byte
//! answer against a typical extraction schema (typed and required fields,
//! an enum, a nested array of line items with patterns and bounds) takes
//! 10.9–11.0 µs with its schema compiled and cached (parse, hash, validate);
//! the first call, which compiles the schema, 1.1–1.7 ms.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use serde_json::Value;

/// Most errors named in a violation's message (the repair prompt and the
/// decision log read it).
const ERRORS_SHOWN: usize = 3;
/// Compiled schemas kept.
const KEPT: u64 = 1024;

/// Why an answer does not satisfy its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub message: String,
}

/// Compiled validators by schema, shared by every request.
pub struct Schemas {
    cache: moka::sync::Cache<u64, Arc<Compiled>>,
}

enum Compiled {
    Ready(Box<jsonschema::Validator>),
    /// The schema itself is not one this gateway can compile (its error).
    Unusable(String),
}

impl Default for Schemas {
    fn default() -> Self {
        Schemas {
            cache: moka::sync::Cache::new(KEPT),
        }
    }
}

impl Schemas {
    /// Checks `answer` (the model's text) against `schema`. `Ok` when it
    /// is JSON that satisfies it, or when the schema cannot be compiled
    /// (the error is given back as the `Ok`'s note).
    pub fn check(&self, schema: &Value, answer: &str) -> Result<Option<String>, Violation> {
        let compiled = self.compiled(schema);
        let validator = match &*compiled {
            Compiled::Ready(v) => v,
            Compiled::Unusable(e) => return Ok(Some(e.clone())),
        };
        let instance: Value = serde_json::from_str(answer.trim()).map_err(|e| Violation {
            message: format!("the answer is not JSON ({e})"),
        })?;
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .take(ERRORS_SHOWN + 1)
            .map(|e| {
                let at = e.instance_path().to_string();
                let at = if at.is_empty() { "/".to_owned() } else { at };
                format!("at {at}: {e}")
            })
            .collect();
        if errors.is_empty() {
            return Ok(None);
        }
        let mut message = errors[..errors.len().min(ERRORS_SHOWN)].join("; ");
        if errors.len() > ERRORS_SHOWN {
            message.push_str("; …");
        }
        Err(Violation { message })
    }

    fn compiled(&self, schema: &Value) -> Arc<Compiled> {
        let key = hash(schema);
        self.cache.get_with(key, || {
            Arc::new(match jsonschema::draft202012::options().build(schema) {
                Ok(v) => Compiled::Ready(Box::new(v)),
                Err(e) => Compiled::Unusable(format!("the schema does not compile: {e}")),
            })
        })
    }
}

/// A schema's identity: its canonical text (serde_json keeps object keys
/// sorted, so two spellings of one schema hash alike).
fn hash(schema: &Value) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    schema.to_string().hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn person() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "age": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "required": ["name", "age"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_conforming_answer_passes_and_each_violation_is_named() {
        let s = Schemas::default();
        assert_eq!(s.check(&person(), r#" {"name":"Ada","age":36} "#), Ok(None));
        let v = s.check(&person(), r#"{"name":"Ada"}"#).unwrap_err();
        assert!(
            v.message.contains("\"age\" is a required property"),
            "{}",
            v.message
        );
        let v = s
            .check(
                &person(),
                r#"{"name":"Ada","age":-1,"tags":["a","b","c"],"x":1}"#,
            )
            .unwrap_err();
        assert!(v.message.contains("at /age"), "{}", v.message);
        assert!(v.message.contains("at /tags"), "{}", v.message);
        let v = s.check(&person(), "Sure! Here is the JSON: {").unwrap_err();
        assert!(
            v.message.starts_with("the answer is not JSON"),
            "{}",
            v.message
        );
    }

    #[test]
    fn draft_2020_12_keywords_apply() {
        let s = Schemas::default();
        let tuple = json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false});
        assert_eq!(s.check(&tuple, r#"["a", 1]"#), Ok(None));
        assert!(s.check(&tuple, r#"["a", 1, 2]"#).is_err());
        assert!(s.check(&tuple, r#"[1, "a"]"#).is_err());
    }

    #[test]
    fn a_schema_that_does_not_compile_passes_answers_with_a_note() {
        let s = Schemas::default();
        let bad = json!({"type": "object", "properties": {"a": {"type": "nonsense"}}});
        let note = s.check(&bad, "{}").unwrap().expect("a note");
        assert!(note.contains("does not compile"), "{note}");
        // A remote reference is never fetched.
        let remote = json!({"$ref": "https://example.com/schema.json"});
        assert!(s.check(&remote, "{}").unwrap().is_some());
    }

    #[test]
    fn one_compilation_per_schema() {
        let s = Schemas::default();
        for _ in 0..3 {
            s.check(&person(), r#"{"name":"A","age":1}"#).unwrap();
        }
        s.cache.run_pending_tasks();
        assert_eq!(s.cache.entry_count(), 1);
    }
}
