//! Deterministic answer text: word pieces, `chunks`, tool arguments, token estimates.

use serde_json::{Map, Value};

/// Split `text` into word pieces: each piece is a run of non-space characters together
/// with the whitespace before it (`"Hello from x."` → `["Hello", " from", " x."]`).
/// Trailing whitespace is attached to the last piece. Concatenating the pieces gives `text`.
pub fn word_pieces(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut cur = String::new();
    let mut seen_word = false;
    for ch in text.chars() {
        if ch.is_whitespace() && seen_word {
            pieces.push(std::mem::take(&mut cur));
            seen_word = false;
        }
        if !ch.is_whitespace() {
            seen_word = true;
        }
        cur.push(ch);
    }
    if !cur.is_empty() {
        if !seen_word && !pieces.is_empty() {
            // only whitespace left: glue it to the previous piece
            let last: &mut String = pieces.last_mut().expect("non-empty");
            last.push_str(&cur);
        } else {
            pieces.push(cur);
        }
    }
    pieces
}

/// The text of `n` generated words: `"word1 word2 … wordN"`.
pub fn generated_text(n: usize) -> String {
    (1..=n)
        .map(|i| format!("word{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Apply the `chunks` rule to an answer text, returning (text, pieces).
///
/// * no `chunks`: the word pieces of `text`;
/// * `chunks: N` and `text` has at least N words: consecutive word pieces grouped into N
///   pieces (the first `words % N` pieces get one extra word);
/// * `chunks: N` and fewer words: the text becomes `"word1 word2 … wordN"`, one piece per word.
pub fn shape_answer(text: &str, chunks: Option<usize>) -> (String, Vec<String>) {
    let words = word_pieces(text);
    match chunks {
        None | Some(0) => (text.to_string(), words),
        Some(n) if words.len() < n => {
            let t = generated_text(n);
            let p = word_pieces(&t);
            (t, p)
        }
        Some(n) => (text.to_string(), group(words, n)),
    }
}

/// Group `pieces` into exactly `n` consecutive groups (n ≤ pieces.len()).
pub fn group(pieces: Vec<String>, n: usize) -> Vec<String> {
    let len = pieces.len();
    let base = len / n;
    let extra = len % n;
    let mut out = Vec::with_capacity(n);
    let mut it = pieces.into_iter();
    for i in 0..n {
        let take = base + usize::from(i < extra);
        out.push(it.by_ref().take(take).collect::<String>());
    }
    out
}

/// Prompt token estimate: characters / 4, at least 1.
pub fn prompt_tokens(chars: usize) -> u64 {
    ((chars / 4).max(1)) as u64
}

/// Synthesize tool-call arguments from a JSON schema's `properties`: string → `"mock"`
/// (or the first `enum` value), number/integer → 1, boolean → true, anything else null.
pub fn synth_args(schema: &Value) -> Value {
    let mut out = Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, prop) in props {
            out.insert(name.clone(), synth_value(prop));
        }
    }
    Value::Object(out)
}

fn synth_value(prop: &Value) -> Value {
    if let Some(first) = prop
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
    {
        return first.clone();
    }
    let ty = match prop.get("type") {
        Some(Value::String(s)) => s.to_ascii_lowercase(),
        Some(Value::Array(types)) => types
            .iter()
            .filter_map(Value::as_str)
            .find(|t| *t != "null")
            .unwrap_or("null")
            .to_ascii_lowercase(),
        _ => String::new(),
    };
    match ty.as_str() {
        "string" => Value::String("mock".into()),
        "number" | "integer" => Value::from(1),
        "boolean" => Value::Bool(true),
        _ => Value::Null,
    }
}

/// Split a tool-call argument string into stream fragments of at most `size` characters.
pub fn fragments(s: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_round_trip() {
        let t = "Hello from the mock openai provider.";
        let p = word_pieces(t);
        assert_eq!(
            p,
            ["Hello", " from", " the", " mock", " openai", " provider."]
        );
        assert_eq!(p.concat(), t);
        assert_eq!(word_pieces(" a  b ").concat(), " a  b ");
        assert_eq!(word_pieces(" a  b "), [" a", "  b "]);
        assert!(word_pieces("").is_empty());
    }

    #[test]
    fn chunks_rule() {
        let (t, p) = shape_answer("a b c d e", Some(2));
        assert_eq!(t, "a b c d e");
        assert_eq!(p, ["a b c", " d e"]);
        let (t, p) = shape_answer("hi", Some(3));
        assert_eq!(t, "word1 word2 word3");
        assert_eq!(p, ["word1", " word2", " word3"]);
    }

    #[test]
    fn args() {
        let s = serde_json::json!({"type":"object","properties":{
            "city":{"type":"string"},"n":{"type":"integer"},"ok":{"type":"boolean"},
            "u":{"type":"string","enum":["c","f"]},"o":{"type":"object"},"t":{"type":["null","number"]}}});
        assert_eq!(
            serde_json::to_string(&synth_args(&s)).unwrap(),
            r#"{"city":"mock","n":1,"ok":true,"u":"c","o":null,"t":1}"#
        );
    }
}
