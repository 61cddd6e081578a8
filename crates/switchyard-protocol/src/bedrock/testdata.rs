//! The Bedrock fixtures (`fixtures/providers/bedrock/`), for this
//! module's tests.

use serde_json::Value;

pub const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/providers/bedrock/"
);

/// A fixture's bytes (`name` relative to the bedrock folder).
pub fn read(name: &str) -> Vec<u8> {
    std::fs::read(format!("{DIR}{name}")).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn json_file(name: &str) -> Value {
    serde_json::from_slice(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}
