//! The property tests' shared settings (test builds only).

use proptest::prelude::ProptestConfig;

/// Cases per property (`PROPTEST_CASES` overrides, for a longer hunt); no
/// failure files in the source tree: a case found becomes a plain test.
pub fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}
