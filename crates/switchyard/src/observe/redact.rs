//! Secrets as a type, and redaction of key-like strings in upstream messages.

use std::fmt;

/// A value that never prints: `Debug` and `Display` show `*****`, and it is not
/// `Serialize`, so it cannot reach a log line or an error body by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret<T>(T);

impl<T> Secret<T> {
    pub fn new(value: T) -> Self {
        Secret(value)
    }
    /// The one way to read the value: call sites are greppable.
    pub fn expose(&self) -> &T {
        &self.0
    }
}

impl<T> fmt::Debug for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

impl<T> fmt::Display for Secret<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("*****")
    }
}

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

/// Remove secrets from a message that may be shown to a client or logged:
/// the configured key values themselves, and anything shaped like a key.
pub fn redact(message: &str, known: &[&str]) -> String {
    let mut out = message.to_owned();
    for k in known {
        if k.len() >= 4 && out.contains(k) {
            out = out.replace(k, "*****");
        }
    }
    key_patterns().replace_all(&out, "*****").into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_print() {
        let s = Secret::new("sk-live-123".to_owned());
        assert_eq!(format!("{s} {s:?}"), "***** *****");
    }

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
}
