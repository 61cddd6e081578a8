//! JSON Schema → Gemini `Schema` (the OpenAPI-3 subset `parameters` and
//! `responseSchema` accept), per MAPPING.md §5. Gemini answers 400 `Unknown
//! name "…"` for any keyword it does not know, so this keeps an allow-list
//! rather than dropping a deny-list.

use std::cell::Cell;

use serde_json::{Map, Value};

/// Keywords Gemini's `Schema` accepts, copied through after their values are
/// sanitised (`type`, `format`, `enum`, `required` are handled separately).
const KEEP: &[&str] = &[
    "description",
    "nullable",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
    "example",
];

/// How deep `$ref`s are followed before giving up (recursive schemas).
const MAX_REF_DEPTH: usize = 8;

/// Schema nodes written before `$ref`s stop being inlined. Each inlining
/// copies a definition, so definitions that each refer to the next ten
/// times grow tenfold per level: 10^8 nodes from a few hundred bytes of
/// request, within [`MAX_REF_DEPTH`].
const MAX_NODES: usize = 10_000;

/// Sanitise a JSON Schema for Gemini. Returns `None` for an object schema
/// without properties (Gemini wants `parameters` omitted then).
///
/// - `$ref` into `$defs` / `definitions` is inlined (recursion is cut at depth
///   8, and inlining stops once the output has 10 000 nodes, with a bare
///   `{"type": "object"}`);
/// - `$schema`, `$id`, `additionalProperties`, `title`, `default`, `examples`,
///   `strict` and every other keyword Gemini lacks are dropped;
/// - `const: x` → `enum: [x]`; enums must be strings, so a non-string enum is
///   dropped and its values are appended to the description;
/// - `type: [X, "null"]` and `anyOf` with a `{type: "null"}` branch →
///   `nullable: true` (an `anyOf` left with one branch is flattened);
///   `oneOf` → `anyOf`; a one-element `allOf` is flattened;
/// - `format` is kept only where Gemini supports it (`date-time`, `enum`,
///   `int32`, `int64`, `float`, `double`);
/// - `required` keeps only names present in `properties`.
pub fn sanitize_schema(schema: &Value) -> Option<Value> {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .and_then(Value::as_object);
    let budget = Cell::new(MAX_NODES);
    let out = Sanitizer { defs, budget }.node(schema, 0);
    let empty_object = out.get("type").and_then(Value::as_str) == Some("object")
        && out
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty);
    let nothing = out.as_object().is_none_or(Map::is_empty);
    (!empty_object && !nothing).then_some(out)
}

struct Sanitizer<'a> {
    defs: Option<&'a Map<String, Value>>,
    /// Nodes left to write before `$ref`s are cut (see [`MAX_NODES`]).
    budget: Cell<usize>,
}

impl Sanitizer<'_> {
    fn node(&self, v: &Value, depth: usize) -> Value {
        self.budget.set(self.budget.get().saturating_sub(1));
        let Some(obj) = v.as_object() else {
            // `true` / `{}`-like schemas: anything goes; Gemini has no such type.
            return Value::Object(Map::new());
        };
        if let Some(target) = obj.get("$ref").and_then(Value::as_str) {
            return match self.resolve(target) {
                Some(def) if depth < MAX_REF_DEPTH && self.budget.get() > 0 => {
                    let mut out = self.node(def, depth + 1);
                    // Sibling keywords (a description next to $ref) win.
                    if let (Value::Object(o), Some(d)) = (&mut out, obj.get("description")) {
                        o.insert("description".into(), d.clone());
                    }
                    out
                }
                _ => serde_json::json!({"type": "object"}),
            };
        }
        if let Some(all) = obj.get("allOf").and_then(Value::as_array) {
            if all.len() == 1 {
                return self.node(&all[0], depth);
            }
        }
        let mut out = Map::new();
        let mut nullable = false;
        match obj.get("type") {
            Some(Value::String(t)) if t == "null" => nullable = true,
            Some(Value::String(t)) => {
                out.insert("type".into(), Value::String(t.clone()));
            }
            Some(Value::Array(types)) => {
                let real: Vec<&Value> = types.iter().filter(|t| *t != "null").collect();
                nullable = real.len() < types.len();
                match real.as_slice() {
                    [] => {}
                    [one] => {
                        out.insert("type".into(), (*one).clone());
                    }
                    many => {
                        let branches = many.iter().map(|t| serde_json::json!({"type": t}));
                        out.insert("anyOf".into(), Value::Array(branches.collect()));
                    }
                }
            }
            _ => {}
        }
        for key in KEEP {
            if let Some(val) = obj.get(*key) {
                out.insert((*key).into(), val.clone());
            }
        }
        if let Some(f) = obj.get("format").and_then(Value::as_str) {
            if matches!(
                f,
                "date-time" | "enum" | "int32" | "int64" | "float" | "double"
            ) {
                out.insert("format".into(), Value::String(f.to_owned()));
            }
        }
        let enum_values = match (obj.get("enum"), obj.get("const")) {
            (Some(Value::Array(e)), _) => Some(e.clone()),
            (None, Some(c)) => Some(vec![c.clone()]),
            _ => None,
        };
        if let Some(values) = enum_values {
            self.enumeration(values, &mut out, &mut nullable);
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            let props: Map<String, Value> = props
                .iter()
                .map(|(k, p)| (k.clone(), self.node(p, depth)))
                .collect();
            if let Some(req) = obj.get("required").and_then(Value::as_array) {
                let req: Vec<Value> = req
                    .iter()
                    .filter(|r| r.as_str().is_some_and(|r| props.contains_key(r)))
                    .cloned()
                    .collect();
                if !req.is_empty() {
                    out.insert("required".into(), Value::Array(req));
                }
            }
            out.insert("properties".into(), Value::Object(props));
        }
        if let Some(items) = obj.get("items") {
            let items = match items {
                // Tuple form: Gemini has none; the first item schema is the best guess.
                Value::Array(a) => a.first().map(|i| self.node(i, depth)),
                other => Some(self.node(other, depth)),
            };
            if let Some(items) = items {
                out.insert("items".into(), items);
            }
        }
        let any = obj
            .get("anyOf")
            .or_else(|| obj.get("oneOf"))
            .and_then(Value::as_array);
        if let Some(any) = any {
            let mut branches = Vec::new();
            for b in any {
                if b.get("type").and_then(Value::as_str) == Some("null") {
                    nullable = true;
                } else {
                    branches.push(self.node(b, depth));
                }
            }
            match branches.len() {
                0 => {}
                1 => {
                    if let Some(Value::Object(only)) = branches.pop() {
                        for (k, v) in only {
                            out.entry(k).or_insert(v);
                        }
                    }
                }
                _ => {
                    out.insert("anyOf".into(), Value::Array(branches));
                }
            }
        }
        if nullable {
            out.insert("nullable".into(), Value::Bool(true));
        }
        Value::Object(out)
    }

    fn enumeration(&self, values: Vec<Value>, out: &mut Map<String, Value>, nullable: &mut bool) {
        let mut strings = Vec::new();
        let mut other = Vec::new();
        for v in values {
            match v {
                Value::String(_) => strings.push(v),
                Value::Null => *nullable = true,
                v => other.push(v.to_string()),
            }
        }
        if other.is_empty() && !strings.is_empty() {
            out.insert("enum".into(), Value::Array(strings));
            if !out.contains_key("type") {
                out.insert("type".into(), Value::String("string".into()));
            }
            return;
        }
        let mut all: Vec<String> = strings.iter().map(Value::to_string).collect();
        all.extend(other);
        if all.is_empty() {
            return;
        }
        let note = format!("Allowed values: {}.", all.join(", "));
        let desc = match out.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => format!("{d} {note}"),
            _ => note,
        };
        out.insert("description".into(), Value::String(desc));
    }

    fn resolve(&self, target: &str) -> Option<&Value> {
        let name = target
            .strip_prefix("#/$defs/")
            .or_else(|| target.strip_prefix("#/definitions/"))?;
        self.defs?.get(name)
    }
}
