//! Redaction of upstream messages: every text an
//! upstream wrote that goes on to a client or a log (error bodies, in-stream
//! errors) is masked against the provider's configured key values as well
//! as anything shaped like a key. Only errors are redacted: the content an
//! upstream streams is never scanned.

use crate::error::GatewayError;

/// Patterns of API keys as providers echo them back in error messages
/// (OpenAI `sk-…` / `sk-proj-…`, Anthropic `sk-ant-…`, Google `AIza…`, bearer
/// tokens), replaced by a fixed mask.
fn key_patterns() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(r"(sk-[A-Za-z0-9_\-\*]{6,}|AIza[0-9A-Za-z_\-]{10,}|(?i:bearer)\s+[A-Za-z0-9_\-\.=]{8,})")
            .expect("static regex")
    })
}

pub const MASK: &str = "*****";

/// The shortest start of a key worth masking at the end of a message cut
/// short (raw error bodies are kept to 512 bytes).
const MIN_PART: usize = 6;

/// Remove secrets from a message that may be shown to a client or logged:
/// the configured key values themselves, and anything shaped like a key.
pub fn redact(message: &str, known: &[&str]) -> String {
    let mut out = message.to_owned();
    for k in known.iter().filter(|k| k.len() >= 4) {
        if out.contains(*k) {
            out = out.replace(*k, MASK);
        }
        if let Some(n) = cut_key(&out, k) {
            out.truncate(out.len() - n);
            out.push_str(MASK);
        }
    }
    key_patterns().replace_all(&out, MASK).into_owned()
}

/// How long a start of `key` `text` ends with (at least [`MIN_PART`]
/// bytes), if it does.
fn cut_key(text: &str, key: &str) -> Option<usize> {
    (MIN_PART..key.len())
        .rev()
        .find(|&n| key.is_char_boundary(n) && text.ends_with(&key[..n]))
}

/// `e` with its message redacted against `known` key values and key shapes.
pub fn redact_error(mut e: GatewayError, known: &[&str]) -> GatewayError {
    e.message = redact(&e.message, known);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_known_and_key_shaped_strings() {
        let m = "Incorrect API key provided: sk-proj-abc123*********xyz9. You can find your API key at https://x.";
        let r = redact(m, &[]);
        assert!(!r.contains("sk-proj"), "{r}");
        assert!(r.contains("Incorrect API key provided: *****"));
        assert_eq!(
            redact("key mysecretvalue leaked", &["mysecretvalue"]),
            "key ***** leaked"
        );
        assert_eq!(
            redact("API key AIzaSyD-abcdefghijklmnop bad", &[]),
            "API key ***** bad"
        );
        assert_eq!(redact("plain message", &[]), "plain message");
    }

    #[test]
    fn a_configured_key_of_any_shape_is_masked_even_cut_short() {
        let key = "plain-secret-value-42";
        let m = format!("Invalid key {key}, and again: {key}.");
        assert_eq!(redact(&m, &[key]), "Invalid key *****, and again: *****.");
        // A body kept to its first bytes, ending inside the key.
        assert_eq!(redact("bad key: plain-secr", &[key]), "bad key: *****");
        // A word that merely starts like a key is left alone.
        assert_eq!(redact("plain text", &[key]), "plain text");
        let e = redact_error(
            GatewayError::upstream(crate::error::ErrorCode::UpstreamError, m),
            &[key],
        );
        assert!(!e.message.contains("secret"), "{}", e.message);
    }
}
