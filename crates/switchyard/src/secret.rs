//! Secrets as a type: a configured key, a database URL or an admin key is a
//! `Secret` from the moment the config is read, so it cannot reach a log
//! line, an error body or a trace by accident (`observe::redact` masks what
//! upstreams echo back).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints() {
        let s = Secret::new("sk-live-123".to_owned());
        assert_eq!(format!("{s} {s:?}"), "***** *****");
        assert_eq!(s.expose(), "sk-live-123");
    }
}
