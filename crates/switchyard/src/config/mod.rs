//! Config loading: YAML text → validated [`Config`], or every problem found.
//!
//! Pipeline: `node` parses the YAML into a positioned tree (serde-saphyr),
//! `env` expands `${VAR}` in string values, `raw` decodes the tree into a typed
//! mirror (unknown keys, wrong types, bad units), `validate` checks the whole
//! and builds [`model::Config`] with defaults applied. Each stage reports all
//! its problems as [`Diagnostic`]s with `file:line:column`; a config with any
//! problem is never returned. Warnings (a provider key written in clear) do
//! not stop a config: they travel in [`Config::warnings`].

pub mod model;
pub use model::*;

mod env;
mod fields;
mod node;
mod raw;
pub mod source;
pub(crate) mod units;
mod validate;

#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

use sha2::{Digest, Sha256};

use node::At;

/// One problem in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// Dotted path of the offending value, e.g. `routes.chat.targets[1]` (empty for syntax errors).
    pub path: String,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

impl Diagnostic {
    /// The line `check` prints for a warning: `file:line:column: warning: path: message`.
    pub fn warning_line(&self) -> String {
        let mut s = format!("{}:{}:{}: warning: ", self.file, self.line, self.column);
        if !self.path.is_empty() {
            s.push_str(&self.path);
            s.push_str(": ");
        }
        s.push_str(&self.message);
        s
    }
}

/// Collects diagnostics for one file.
pub(crate) struct Diags {
    file: String,
    list: Vec<Diagnostic>,
    /// The paths in `list`, sorted (for [`Diags::reported`]).
    paths: BTreeSet<String>,
    /// Problems that do not stop the config (a key written in clear).
    warnings: Vec<Diagnostic>,
}

impl Diags {
    fn new(file: &str) -> Self {
        Diags {
            file: file.to_string(),
            list: Vec::new(),
            paths: BTreeSet::new(),
            warnings: Vec::new(),
        }
    }
    /// Reports a missing required key, unless its value was present but
    /// already reported (bad type, unset variable): one problem, one message.
    pub(crate) fn missing(&mut self, at: &At, message: impl Into<String>) {
        if !self.reported(&at.path) {
            self.err(at, message);
        }
    }

    /// Whether a problem was already reported at `path` or inside it: at
    /// `path` itself, or under `path.` or `path[` — each a contiguous run of
    /// the sorted paths (`/` and `\` sort right after `.` and `[`), so a
    /// file with thousands of problems is not checked in quadratic time.
    pub(crate) fn reported(&self, path: &str) -> bool {
        let under = |open: char, close: char| {
            let from = format!("{path}{open}");
            let to = format!("{path}{close}");
            self.paths.range(from..to).next().is_some()
        };
        self.paths.contains(path) || under('.', '/') || under('[', '\\')
    }

    pub(crate) fn err(&mut self, at: &At, message: impl Into<String>) {
        let d = self.diagnostic(at, message.into());
        if !self.paths.contains(&d.path) {
            self.paths.insert(d.path.clone());
        }
        self.list.push(d);
    }

    /// A warning: shown by `check` and logged by `serve`, the config still loads.
    pub(crate) fn warn(&mut self, at: &At, message: impl Into<String>) {
        let d = self.diagnostic(at, message.into());
        self.warnings.push(d);
    }

    fn diagnostic(&self, at: &At, message: String) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            line: at.pos.line,
            column: at.pos.column,
            path: at.path.clone(),
            message,
        }
    }
}

/// The variables that replace `server.listen` and `server.admin_listen`
/// (what `switchyard serve --listen` / `--admin-listen` set), so that the
/// demo and a config file can be moved without editing it. They are read
/// wherever a config is loaded (`serve`, `check`, a reload), so every
/// check of the addresses applies to the ones in force.
pub const LISTEN_ENV: &str = "SWITCHYARD_LISTEN";
pub const ADMIN_LISTEN_ENV: &str = "SWITCHYARD_ADMIN_LISTEN";

/// Reads and validates a config file, expanding `${VAR}` from the process environment.
pub fn load_file(path: &Path) -> Result<Config, Vec<Diagnostic>> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(src) => load_str(&src, &file, &|name| std::env::var(name).ok()),
        Err(e) => Err(vec![Diagnostic {
            file,
            line: 0,
            column: 0,
            path: String::new(),
            message: format!("cannot read: {e}"),
        }]),
    }
}

/// A config's version: the sha256 of its text, hex.
pub fn text_version(src: &str) -> String {
    hex::encode(Sha256::digest(src.as_bytes()))
}

/// Validates config text. `file` names it in diagnostics; `env` looks up variables
/// (for `${VAR}`, `keys[].env` and `key_env`). Diagnostics come sorted by position.
pub fn load_str(
    src: &str,
    file: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, Vec<Diagnostic>> {
    let mut d = Diags::new(file);
    let version = text_version(src);
    let Some(mut root) = node::parse(src, &mut d) else {
        return Err(d.list);
    };
    let top = At::default();
    env::expand_tree(&mut root, &top, src, env, &mut d);
    let raw = raw::decode(&mut d, &root);
    let mut config = validate::validate(&mut d, raw, env, version);
    if d.list.is_empty() {
        d.warnings.sort_by_key(|x| (x.line, x.column));
        config.warnings = d.warnings;
        return Ok(config);
    }
    d.list.sort_by_key(|x| (x.line, x.column));
    d.list.dedup();
    Err(d.list)
}
